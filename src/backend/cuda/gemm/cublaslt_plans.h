// The cuBLASLt state a dense tensor-core matmul path keeps (fp8_matmul.cpp,
// bf16_matmul.cpp): the handle, a workspace, and one plan per shape.
//
// Every plan is the row-major product y [T, N] = X [T, K] · Wᵀ seen by
// cuBLASLt as the column-major D [N, T] = op(A) · B: A = W stored
// column-major [K, N] (transa = T: W's rows are A's columns, ld K), B = X
// column-major [K, T] (ld K), D = y column-major [N, T] (ld ldy), fp32
// compute and output — the "TN" layout the FP8 kernels need. Plans are made
// by host calls only (no GPU work), so a first call may happen while a graph
// is being recorded.
#pragma once

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <array>
#include <cstdint>
#include <functional>
#include <map>

#include "backend/cuda/runtime/device_buffer.h"

namespace m2::cuda {

// One shape's descriptors and chosen algorithm (ok false: none exists).
struct LtPlan {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
  cublasLtMatmulAlgo_t algo{};
  bool ok = false;
};

template <class T>
bool lt_set(cublasLtMatmulDesc_t op, cublasLtMatmulDescAttributes_t attr, const T& v) {
  return cublasLtMatmulDescSetAttribute(op, attr, &v, sizeof(v)) == CUBLAS_STATUS_SUCCESS;
}

// What a path asks of its plans.
struct LtPlanSpec {
  cudaDataType_t w_type;  // A (the weights)
  cudaDataType_t x_type;  // B (the activations)
  // The alignment every buffer is guaranteed (the heuristic's default
  // assumes 256 bytes); 0 keeps the default.
  uint32_t min_align = 0;
  const char* what = "";      // for the log: "block-scaled FP8", "BF16"
  const char* fallback = "";  // what runs instead, for the log
};

class LtPlans {
 public:
  static constexpr size_t kWorkspaceBytes = size_t{32} << 20;

  explicit LtPlans(LtPlanSpec spec);
  ~LtPlans();
  LtPlans(const LtPlans&) = delete;
  LtPlans& operator=(const LtPlans&) = delete;

  // Null when cublasLtCreate failed (logged once, with the fallback).
  cublasLtHandle_t handle() const { return handle_; }
  void* workspace(cudaStream_t stream) { return workspace_.reserve(kWorkspaceBytes, stream); }
  void reserve_workspace(cudaStream_t stream) { workspace_.reserve_up_front(kWorkspaceBytes, stream); }
  // The plan of this shape, made on first use (a shape without an
  // algorithm is logged once and stays !ok); `configure` sets a new plan's
  // extra descriptor attributes (scale modes and pointers; false: failed).
  const LtPlan& plan(int64_t T, int64_t N, int64_t K, int64_t ldy,
                     const std::function<bool(cublasLtMatmulDesc_t)>& configure = {});

 private:
  LtPlanSpec spec_;
  cublasLtHandle_t handle_ = nullptr;
  DeviceBuffer workspace_{"cuBLASLt workspace"};
  std::map<std::array<int64_t, 4>, LtPlan> plans_;  // (T, N, K, ldy)
};

}  // namespace m2::cuda
