// The router's logits for many tokens as one fp32 GEMM (cuBLASLt, fp32
// compute: no TF32), then route.cu's selection alone (launch_route_select).
// The one-kernel router (launch_route) streams the gate once per group of 4
// tokens and stages each group's x in every block: fine for a decode step,
// but its work grows with T/4 passes over the gate (~1 µs per token on an
// H200 at T = 64: 63 µs), where a GEMM reads the gate once.
#pragma once

#include <cuda_runtime.h>

#include <memory>

#include "backend/cuda/runtime/device_types.h"

namespace m2::cuda {

class LtPlans;  // cublaslt_plans.h

// From this many tokens the CUDA backend routes through RouteGemm.
constexpr int64_t kRouteGemmMinTokens = 17;

class RouteGemm {
 public:
  explicit RouteGemm(bool enabled);  // CudaOptions::route_gemm
  ~RouteGemm();
  // Whether logits() takes these: an FP32 gate, T >= kRouteGemmMinTokens,
  // 16-byte aligned buffers.
  bool applies(const float* x, int64_t T, const DeviceWeight& gate, const float* logits) const;
  // logits [T, E] = x [T, H] · gateᵀ; cudaErrorNotSupported where cuBLASLt
  // is missing or has no algorithm for the shape (logged once).
  cudaError_t logits(const float* x, int64_t T, const DeviceWeight& gate, float* logits, cudaStream_t stream);
  // The handle and workspace, made now (CudaBackend::reserve_scratch).
  void reserve(cudaStream_t stream);

 private:
  bool enabled_;
  LtPlans& lt();
  std::unique_ptr<LtPlans> lt_;
};


}  // namespace m2::cuda
