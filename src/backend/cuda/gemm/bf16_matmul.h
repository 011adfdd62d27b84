// BF16 weights x more than kGemvMaxTokens tokens on tensor cores (plain C++,
// no device code): y[T, N] fp32 = x[T, K] fp32 · Wᵀ, W BF16 [N, K].
//
// The activations stay fp32 in meaning: each is split into two bf16 values,
// hi = bf16_rn(x) and lo = bf16_rn(x - hi), and the product is computed as
// hi · Wᵀ + lo · Wᵀ by two cuBLASLt BF16 GEMMs with fp32 accumulation
// (bf16_matmul.cpp). Error bound of the split, for x that rounds to a finite
// bf16 (|x| < ~3.39e38), with 2^e <= |x| < 2^(e+1):
//   - bf16 keeps 8 significant bits, so |x - hi| <= 2^(e-8) (half a bf16 ulp
//     in x's binade), and x - hi is exact in fp32: a multiple of x's fp32 ulp
//     2^(e-23) of at most 2^(e-8), i.e. at most 16 significant bits;
//   - if |x - hi| = 2^(e-8) it is a power of two, lo = x - hi exactly;
//     otherwise |x - hi| < 2^(e-8) lies in a binade 2^f with f <= e - 9 and
//     rounding it to bf16 errs by at most 2^(f-8) <= 2^(e-17);
//   so |x - hi - lo| <= 2^-17 |x|. (Below |x| ~ 2^-117, lo is a bf16
//   subnormal and the error is at most 2^-134 absolute.)
// The weights are exactly BF16 and hi·w, lo·w are exact in fp32 (8 x 8
// significant bits), so |y - x·Wᵀ| <= 2^-17 Σ_k |x_k w_k| + the fp32
// accumulation error of the two GEMMs (tests/backend/cuda/gemm/bf16_gemm_test.cpp).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <memory>

#include "backend/cuda/runtime/device_buffer.h"
#include "backend/cuda/gemm/matmul.h"

namespace m2::cuda {

class LtPlans;  // cublaslt_plans.h

// Dense BF16 matmuls of at least this many tokens take the tensor-core path
// (below: the GEMV of matmul.cu, which streams W once at memory speed).
constexpr int64_t kBf16GemmMinTokens = kGemvMaxTokens + 1;

// hi[t, k] = bf16_rn(x[t, k]), lo[t, k] = bf16_rn(x[t, k] - hi[t, k]) as bf16
// bits, for t < T, k < K; hi and lo packed [T, K] (row stride K). A
// non-finite hi gets lo = 0 (inf stays inf). K % 4 == 0, x 16-byte aligned,
// ldx % 4 == 0, hi and lo 8-byte aligned. (matmul.cu)
cudaError_t launch_split_bf16(const float* x, int64_t T, int64_t K, int64_t ldx, uint16_t* hi, uint16_t* lo,
                              cudaStream_t stream);

// The dense BF16 tensor-core path of one backend: the split scratch, the
// cuBLASLt handle, workspace and plans (one per shape). Graph capture: the
// first (eager) call of a shape sizes the scratch and makes its plan, so a
// recorded call allocates nothing and does not synchronise.
class Bf16Matmul {
 public:
  explicit Bf16Matmul(bool enabled);
  ~Bf16Matmul();
  Bf16Matmul(const Bf16Matmul&) = delete;
  Bf16Matmul& operator=(const Bf16Matmul&) = delete;

  bool enabled() const { return enabled_; }
  // The split scratch for up to `elems` = T x K activations, the handle and
  // workspace, made now (CudaBackend::reserve_scratch).
  void reserve(int64_t elems, cudaStream_t stream);
  // Whether y = x · Wᵀ for T tokens takes this path: enabled, BF16 w,
  // T >= kBf16GemmMinTokens, K % 8 == 0 (bf16 rows in 16-byte multiples),
  // x, W and y 16-byte aligned, ldx % 4 == 0, ldy % 4 == 0.
  bool applies(const float* x, int64_t T, int64_t ldx, const DeviceWeight& w, const float* y, int64_t ldy) const;
  // Splits x into scratch, then y = hi · Wᵀ (beta 0) and y += lo · Wᵀ (beta
  // 1). cudaErrorNotSupported (nothing launched) when cuBLASLt has no
  // algorithm for the shape or did not start (logged once): the caller then
  // runs matmul.cu's kernel; cudaErrorInvalidValue when !applies(...); any
  // other error is a failed launch (logged with the op and shapes).
  cudaError_t run(const float* x, int64_t T, int64_t ldx, const DeviceWeight& w, float* y, int64_t ldy,
                  cudaStream_t stream);

 private:
  bool enabled_;
  LtPlans& lt();
  std::unique_ptr<LtPlans> lt_;  // created on first use (or by reserve)
  DeviceBuffer split_{"BF16 GEMM hi + lo"};  // hi [T, K] then lo [T, K], bf16, each at a 256-byte boundary
};

}  // namespace m2::cuda
