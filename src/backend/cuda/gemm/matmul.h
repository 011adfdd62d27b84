// Launchers of matmul.cu: dense products with fp32 activations (GEMV, tiled SIMT).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "backend/cuda/gemm/matmul_plan.h"
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
// y[t, :] = x[t, :] · Wᵀ for t < T (x row stride ldx) by `kernel`, one of
// gemv, gemv_mma (few tokens: W streamed once at memory speed) or
// tiled_simt (matmul_plan.h); split outputs (y.y[1], y.y[2] set apart from
// y.y[0]) only on the GEMV kernels. cudaErrorInvalidValue when the kernel
// cannot take the shape or the pointers' alignment.
cudaError_t launch_matmul(MatmulKernel kernel, const float* x, int64_t T, int64_t ldx, const DeviceWeight& w,
                          const MatmulOut& y, int num_sms, cudaStream_t stream);
// One output y [T, N] with row stride ldy.
MatmulOut single_out(float* y, int64_t ldy, int64_t rows);

}  // namespace m2::cuda
