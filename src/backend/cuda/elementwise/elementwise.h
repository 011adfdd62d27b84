// Launchers of elementwise.cu: embedding, norms, adds, row gathers, KV stores.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "backend/cuda/runtime/device_types.h"

namespace m2::cuda {

// ---- elementwise.cu ----------------------------------------------------------
// out[i, :] = table[ids[i] - first_id, :] as fp32, zeros where that is not a
// row of table [rows, H] (Backend::embed).
cudaError_t launch_embed(const void* table, DType dtype, int64_t rows, int64_t first_id, int64_t H, const int32_t* ids,
                         int64_t T, float* out, cudaStream_t stream);
// out = x / rms(x) * w per row of n (fp64 statistics); out may be x. With
// out8.q: also out's FP8 copy (n a multiple of 128, out 16-byte aligned).
cudaError_t launch_rms_norm(const float* x, int64_t rows, int64_t n, const void* w, DType w_dtype, float eps,
                            float* out, Fp8Out out8, cudaStream_t stream);
// x += y, then out = rms_norm(x) as above (x updated in place; out != x).
cudaError_t launch_add_rms_norm(float* x, const float* y, int64_t rows, int64_t n, const void* w, DType w_dtype,
                                float eps, float* out, Fp8Out out8, cudaStream_t stream);
// x[i] += y[i] for i < n.
cudaError_t launch_add(float* x, const float* y, int64_t n, cudaStream_t stream);
// out[i, :] = x[rows[i], :], rows of `cols` floats.
cudaError_t launch_gather_rows(const float* x, int64_t cols, const int64_t* rows, int64_t n_rows, float* out,
                               cudaStream_t stream);
// Rows t < T of k and v ([T, kv_heads * head_dim], fp32) to the cache slots
// slots[t] (cache rows of kv_heads * head_dim elements of `dtype`). F32, BF16:
// RNE. F8_E4M3: per (token, kv head) scale = amax / 448 (1 if all zero) to
// k_scales / v_scales [slot * kv_heads + head], codes e4m3(x / scale) (RNE,
// saturating), the CPU backend's bytes exactly.
cudaError_t launch_kv_store(const float* k, const float* v, int64_t T, const int64_t* slots, int kv_heads,
                            int head_dim, void* k_cache, void* v_cache, float* k_scales, float* v_scales, DType dtype,
                            cudaStream_t stream);

}  // namespace m2::cuda
