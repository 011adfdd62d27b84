// Launcher of qk_norm_rope.cu: full-width QK RMSNorm, partial RoPE, KV store.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "backend/cuda/runtime/device_types.h"

namespace m2::cuda {

// ---- qk_norm_rope.cu ----------------------------------------------------------
constexpr int kQkMaxHalfRotary = 64;
struct QkNormRopeArgs {
  float* q = nullptr;  // [T, q_dim]
  float* k = nullptr;  // [T, kv_dim]
  int64_t T = 0, q_dim = 0, kv_dim = 0;
  const void* q_norm = nullptr;  // [q_dim] or null (no norm)
  const void* k_norm = nullptr;  // [kv_dim] or null
  DType q_norm_dtype = DType::kF32, k_norm_dtype = DType::kF32;
  // Widths the mean of squares is taken over: q_dim and kv_dim on one GPU,
  // the full widths when q/k are head shards of a tensor-parallel group.
  int64_t q_norm_width = 0, kv_norm_width = 0;
  // Tensor parallelism (Backend::qk_sum_squares / qk_norm_rope_sums): with
  // sums_out [T, 2] the kernel only writes each row's (Σ q², Σ k²) there (fp32)
  // and stops; with sums_in [T, 2] (the sums all-reduced over the ranks) it
  // takes them instead of its own. Either null: the one-GPU step.
  float* sums_out = nullptr;
  const float* sums_in = nullptr;
  float eps = 1e-6f;
  const int32_t* positions = nullptr;  // [T]
  int head_dim = 0, rotary_dim = 0;
  double inv_freq[kQkMaxHalfRotary] = {};  // theta^(-2i / rotary_dim), i < rotary_dim / 2
  // Optional fused KV store (slots null: none): rotated k and v [T, kv_dim]
  // to cache rows of kv_dim elements of cache_dtype (F32, BF16 or F8_E4M3) at
  // slots[t], with launch_kv_store's conversions and bytes; F8_E4M3 also
  // writes the per (token, kv head) scales [slot * kv_heads + head]
  // (kv_heads = kv_dim / head_dim) to k_scales / v_scales. A row whose
  // slot is negative (padding a recorded decode step) writes nothing.
  const float* v = nullptr;
  const int64_t* slots = nullptr;
  void* k_cache = nullptr;
  void* v_cache = nullptr;
  float* k_scales = nullptr;
  float* v_scales = nullptr;
  DType cache_dtype = DType::kBF16;
};
cudaError_t launch_qk_norm_rope(const QkNormRopeArgs& a, cudaStream_t stream);

}  // namespace m2::cuda
