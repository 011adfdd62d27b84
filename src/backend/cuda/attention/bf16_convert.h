// Launchers of bf16_convert.cu (bf16 copies around FlashInfer's kernel).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "backend/cuda/runtime/device_types.h"

namespace m2::cuda {

// ---- bf16_convert.cu ----------------------------------------------------------
// y = bf16(x) (RNE) of n floats (n a multiple of 4, x 16-byte and y 8-byte aligned).
cudaError_t launch_f32_to_bf16(const float* x, int64_t n, void* y, cudaStream_t stream);
// out = float(o) for a bf16 [T, cols] (cols a multiple of 128); with out8.q
// also out's FP8 copy, as every FP8 producer writes it.
cudaError_t launch_bf16_to_f32(const void* o, int64_t T, int64_t cols, float* out, Fp8Out out8, cudaStream_t stream);
// out[i] = bf16(code x scale) of FP8 cache pages pages[0..n_pages): out is
// [n_pages, block_size, kv_heads, head_dim] (head_dim 128), cache and scales
// one layer's K (or V) codes [blocks, block_size, kv_heads, head_dim] and
// scales [blocks, block_size, kv_heads].
cudaError_t launch_fp8_pages_to_bf16(const uint8_t* cache, const float* scales, const int32_t* pages, int64_t n_pages,
                                     int block_size, int kv_heads, int head_dim, void* out, cudaStream_t stream);

}  // namespace m2::cuda
