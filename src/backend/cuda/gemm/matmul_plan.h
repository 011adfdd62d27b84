// Which kernel computes a dense product y [T, N] = x [T, K] · Wᵀ (the matmul
// and qkv_proj ops): the one place the choice is made, a pure function of
// the shape, the options and the device (tested without a GPU, printed by
// `m2cpp info --plan`). The ops execute the plan; a launcher handed a plan
// whose shape it cannot take returns cudaErrorInvalidValue.
//
//   kernel          when                                             activations
//   gemv            T <= 16 (decode), any stored dtype               fp32
//   gemv_mma        T <= 16, FP8 W, K % 128 == 0 (gemv_mma.cuh)      fp32 (hi + lo f16)
//   tiled_simt      anything else (the fallback of every path)       fp32
//   fp8_own         T >= 17, FP8 W [N, K] in 128-multiples           e4m3 per token per 128
//   fp8_cublaslt    as fp8_own, N and K >= 1024, fp8_gemm=cublaslt:  e4m3 per token per 128
//                   the first lt_rows (a multiple of 16) rows on
//                   cuBLASLt, the rest on fp8_own
//   bf16_cublaslt   T >= 17, BF16 W, K % 8 == 0                      fp32 as bf16 hi + lo
//
// batch_invariant: the kernel is a function of W alone, the same for every T
// (each of them computes a row from that row only, in a fixed order): FP8 W
// in 128-multiples fp8_own (W8A8 even for one token), other weights the
// GEMV (4 tokens a pass, any T) where it can read them, else tiled_simt;
// never cuBLASLt (its algorithm, and so its sums, may change with T).
#pragma once

#include <cstdint>
#include <string>

#include "backend/cuda/runtime/cuda_options.h"
#include "tensor/dtype.h"

namespace m2::cuda {

struct DeviceCaps;  // runtime/device_caps.h

enum class MatmulKernel { kGemv, kGemvMma, kTiledSimt, kFp8Own, kFp8CublasLt, kBf16CublasLt };
const char* matmul_kernel_name(MatmulKernel k);

struct MatmulShape {
  int64_t tokens = 0;  // T
  int64_t rows = 0;    // N: W's rows, y's columns
  int64_t cols = 0;    // K
  DType dtype = DType::kF32;  // W's stored dtype
  // FP8 W: scales [N / 128, K / 128] packed (scale_ld = K / 128).
  bool packed_scales = true;
  // x, y and W 16-byte aligned with row strides in multiples of 4 floats:
  // every activation and weight the backend allocates; false sends the
  // product to tiled_simt.
  bool aligned = true;
};

struct MatmulPlan {
  MatmulKernel kernel = MatmulKernel::kTiledSimt;
  // cuBLASLt kernels: what runs if cuBLASLt has no algorithm for the shape
  // at run time (logged once per shape).
  MatmulKernel fallback = MatmulKernel::kTiledSimt;
  int64_t lt_rows = 0;      // fp8_cublaslt: rows [0, lt_rows) on cuBLASLt, ...
  int64_t own_rows = 0;     // ... the other own_rows on fp8_own
  int tokens_per_pass = 0;  // gemv (1 or 4), gemv_mma (8): tokens a pass over W serves
  // FP8 kernels: x in e4m3 per token per 128 channels, from its producer's
  // FP8 copy where one was written (fp8_act_copy.h), else quantised first.
  bool fp8_activations = false;
  // Device scratch the product takes beyond x, W and y: FP8 kernels, x's
  // codes and scales when no producer wrote them (quantize_bytes) and, for a
  // split, the cuBLASLt rows' re-strided scales; bf16_cublaslt, x as bf16 hi
  // + lo. (cuBLASLt's 32 MiB workspace is one per path and backend.)
  size_t quantize_bytes = 0;
  size_t scratch_bytes = 0;
  std::string describe() const;
};

MatmulPlan plan_matmul(const MatmulShape& s, const CudaOptions& o, const DeviceCaps& caps);

}  // namespace m2::cuda
