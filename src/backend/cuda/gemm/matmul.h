// Launchers of matmul.cu: dense products with fp32 activations (GEMV, tiled SIMT).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "backend/cuda/runtime/device_types.h"

namespace m2::cuda {

// ---- matmul.cu ----------------------------------------------------------------
// Up to this many tokens a product streams its weights once (GEMV core).
constexpr int64_t kGemvMaxTokens = 16;
// Outputs of a product whose weight rows are several matrices stacked (q|k|v):
// rows [0, end[0]) go to y[0], [end[0], end[1]) to y[1], the rest to y[2],
// each at its own row stride, columns counted from the segment's first row.
struct MatmulOut {
  float* y[3] = {};
  int64_t ld[3] = {};
  int64_t end[2] = {};
};
// Whether FP8 decode products run on tensor cores (gemv_mma.cuh), not on the
// SIMT GEMV core. Process-wide: M2CPP_GEMV_MMA=off sets it false at start;
// benchmarks flip it to compare the two.
bool& gemv_mma_enabled();
// The GEMV path of launch_matmul into split outputs: T <= kGemvMaxTokens,
// FP8 or BF16 weights (cudaErrorInvalidValue otherwise).
cudaError_t launch_matmul_split(const float* x, int64_t T, int64_t ldx, const DeviceWeight& w, const MatmulOut& y,
                                int num_sms, cudaStream_t stream);
// y[t, :] = x[t, :] · Wᵀ for t < T (x row stride ldx, y row stride ldy).
// Few tokens stream W once at memory speed (GEMV); many go to a tiled kernel.
cudaError_t launch_matmul(const float* x, int64_t T, int64_t ldx, const DeviceWeight& w, float* y, int64_t ldy,
                          int num_sms, cudaStream_t stream);

}  // namespace m2::cuda
