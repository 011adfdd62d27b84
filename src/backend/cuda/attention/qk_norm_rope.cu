// The MiniMax QK step in one kernel, one block per token: full-width RMSNorm
// of q [q_dim] and k [kv_dim] (one mean of squares over all heads, spec
// §2.2c), partial NeoX RoPE on the first rotary_dim dims of every head, and
// (when slots are given) the write of the rotated k and of v into the paged
// cache: F32 and BF16 rows element by element, FP8 rows (with their per
// (token, kv head) scales) after the rotated k and v are staged in shared
// memory, one warp per (K or V, kv head) as kv_store does it
// (store_fp8_head, the same code as launch_kv_store's), so that no separate
// kv_store launch follows for any cache dtype.
//
// The token's q and k rows are read once, all loads in flight together (a
// loop of dependent loads made this a 23 µs kernel at batch 1), staged in
// shared memory for the rotation's partner dims, and written back in place.
//
// Tensor parallelism: a rank holds a slice of the heads, so the kernel first
// reduces its local sums of squares of q and k (a [T, 2] quantity), then
// divides by the *global* widths (q_norm_width, kv_norm_width). Under tensor
// parallelism it runs twice: once to write those sums (sums_out), which the
// ranks all-reduce, and once to apply the reduced ones (sums_in); on one GPU
// the local sums are the global ones.
//
// Rounding follows the CPU backend op for op: fp64 statistics and angles
// (inverse frequencies from the host by the same std::pow formula), (x * inv)
// * w, then a*c - b*s and b*c + a*s without fused multiply-adds.
#include "backend/cuda/runtime/common.cuh"
#include "backend/cuda/attention/qk_norm_rope.h"

namespace m2::cuda {
namespace {

// Threads per token: 1024 (4 float4 of q | k each, q_dim + kv_dim <= 16384)
// for a few tokens, where the chain of one block is the time; 256 (8 float4
// each, <= 8192) from kQkWideTokens on, where blocks queue behind each other
// and four times as many fit on an SM at once (a 1024-thread block at 64
// registers fills an SM: 0.43 ms per layer for an 8K prefill on an H200).
constexpr int kQkWideTokens = 128;
template <int kThreads>
constexpr int kLoadsOf = kThreads == 1024 ? 4 : 8;

template <DType KT, int kThreads>
__global__ void __launch_bounds__(kThreads, kThreads == 1024 ? 1 : 4) qk_norm_rope_kernel(QkNormRopeArgs a) {
  constexpr int kLoads = kLoadsOf<kThreads>;  // float4 per thread held in registers
  // The few-token kernel requests the norm weights with the row (latency);
  // the wide one reads them when it scales (L1 hits, shared by every token),
  // so that its registers (64: four blocks an SM) hold the row only.
  constexpr bool kEarlyWeights = kThreads == 1024;
  // [(q_dim + kv_dim) / 4]: q then k, normalised, before rotation; FP8 caches:
  // then v [kv_dim / 4], and k is overwritten by the rotated k once every
  // rotation has read its partner dims.
  extern __shared__ float4 row4[];
  __shared__ double scratch[2 * kWarp];
  __shared__ float cs[2 * kQkMaxHalfRotary];  // cos θ_i, then sin θ_i
  const int64_t t = blockIdx.x;
  const int nq4 = static_cast<int>(a.q_dim / 4), n4 = nq4 + static_cast<int>(a.kv_dim / 4);
  grid_dependency_wait();
  allow_dependents();
  float* q = a.q + t * a.q_dim;
  float* k = a.k + t * a.kv_dim;
  auto src = [&](int c) { return c < nq4 ? reinterpret_cast<float4*>(q) + c : reinterpret_cast<float4*>(k) + (c - nq4); };

  // Phase 1: the row's sums of squares (the quantity a TP group all-reduces).
  float4 v[kLoads];
#pragma unroll
  for (int i = 0; i < kLoads; ++i) {
    const int c = threadIdx.x + i * kThreads;
    v[i] = c < n4 ? *src(c) : make_float4(0.f, 0.f, 0.f, 0.f);
  }
  // Everything else the token needs is requested now too, so that it arrives
  // while the sums are reduced: the norm weights (few-token kernel), v (for
  // the cache), and the rotary angles θ_i = pos · inv_freq_i.
  auto norm_weights = [&](int c) {
    const bool is_q = c < nq4;
    const void* norm = is_q ? a.q_norm : a.k_norm;
    if (c >= n4 || !norm) return make_float4(1.f, 1.f, 1.f, 1.f);
    return load4_any(norm, is_q ? a.q_norm_dtype : a.k_norm_dtype, 4ll * (is_q ? c : c - nq4));
  };
  float4 nw[kEarlyWeights ? kLoads : 1];
  if constexpr (kEarlyWeights) {
#pragma unroll
    for (int i = 0; i < kLoads; ++i) nw[i] = norm_weights(threadIdx.x + i * kThreads);
  }
  // A negative slot (a row padding a recorded decode step) writes no KV.
  const int64_t slot = a.slots ? a.slots[t] : -1;
  const bool store_v = slot >= 0 && threadIdx.x < a.kv_dim / 4;
  const float4 vv = store_v ? reinterpret_cast<const float4*>(a.v + t * a.kv_dim)[threadIdx.x] : make_float4(0.f, 0.f, 0.f, 0.f);
  const int64_t slot_base = slot >= 0 ? slot * a.kv_dim : -1;
  const int half = a.rotary_dim / 2;
  if (threadIdx.x < half && !a.sums_out) {
    const int i = threadIdx.x;
    double sn, cn;  // one argument reduction for both
    sincos(a.positions[t] * a.inv_freq[i], &sn, &cn);
    cs[i] = static_cast<float>(cn);
    cs[kQkMaxHalfRotary + i] = static_cast<float>(sn);
  }

  double sq = 0, sk = 0;
#pragma unroll
  for (int i = 0; i < kLoads; ++i) {
    const int c = threadIdx.x + i * kThreads;
    const double s = static_cast<double>(v[i].x) * v[i].x + static_cast<double>(v[i].y) * v[i].y +
                     static_cast<double>(v[i].z) * v[i].z + static_cast<double>(v[i].w) * v[i].w;
    (c < nq4 ? sq : sk) += s;
  }
  block_sum2(sq, sk, scratch);
  if (a.sums_out) {  // (uniform over the block)
    if (threadIdx.x == 0) a.sums_out[2 * t] = static_cast<float>(sq), a.sums_out[2 * t + 1] = static_cast<float>(sk);
    return;
  }
  if (a.sums_in) sq = a.sums_in[2 * t], sk = a.sums_in[2 * t + 1];
  const double eps = a.eps;
  const float inv_q = static_cast<float>(1.0 / sqrt(sq / static_cast<double>(a.q_norm_width) + eps));
  const float inv_k = static_cast<float>(1.0 / sqrt(sk / static_cast<double>(a.kv_norm_width) + eps));

  // Normalised values (rotation inputs) to shared memory.
#pragma unroll
  for (int i = 0; i < kLoads; ++i) {
    const int c = threadIdx.x + i * kThreads;
    if (c >= n4) continue;
    const bool is_q = c < nq4;
    if (is_q ? a.q_norm : a.k_norm) {
      const float inv = is_q ? inv_q : inv_k;
      float4 w;
      if constexpr (kEarlyWeights) w = nw[i];
      else w = norm_weights(c);
      v[i] = make_float4(__fmul_rn(__fmul_rn(v[i].x, inv), w.x), __fmul_rn(__fmul_rn(v[i].y, inv), w.y),
                         __fmul_rn(__fmul_rn(v[i].z, inv), w.z), __fmul_rn(__fmul_rn(v[i].w, inv), w.w));
    }
    row4[c] = v[i];
  }
  __syncthreads();

  // Phase 2: rotate, write back in place and, for k into an F32 or BF16
  // cache, into the cache slot.
  const float* row = reinterpret_cast<const float*>(row4);
#pragma unroll
  for (int i = 0; i < kLoads; ++i) {
    const int c = threadIdx.x + i * kThreads;
    if (c >= n4) continue;
    float out[4];
    const int d0 = 4 * (c < nq4 ? c : c - nq4) % a.head_dim;  // the 4 dims lie in one head (head_dim % 4 == 0)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int j = 4 * c + e;  // in the staged [q | k] row
      const int d = d0 + e;
      if (d < half) {
        out[e] = __fsub_rn(__fmul_rn(row[j], cs[d]), __fmul_rn(row[j + half], cs[kQkMaxHalfRotary + d]));
      } else if (d < a.rotary_dim) {
        const int p = d - half;
        out[e] = __fadd_rn(__fmul_rn(row[j], cs[p]), __fmul_rn(row[j - half], cs[kQkMaxHalfRotary + p]));
      } else {
        out[e] = row[j];
      }
    }
    v[i] = make_float4(out[0], out[1], out[2], out[3]);
    *src(c) = v[i];
    if constexpr (KT != DType::kF8E4M3) {
      if (c >= nq4 && slot_base >= 0) {
        const int64_t dst = slot_base + 4ll * (c - nq4);
#pragma unroll
        for (int e = 0; e < 4; ++e) Stored<KT>::store1(a.k_cache, dst + e, out[e]);
      }
    }
  }
  if constexpr (KT != DType::kF8E4M3) {
    if (store_v) {
      const float ve[4] = {vv.x, vv.y, vv.z, vv.w};
#pragma unroll
      for (int e = 0; e < 4; ++e) Stored<KT>::store1(a.v_cache, slot_base + 4ll * threadIdx.x + e, ve[e]);
    }
  } else {
    // FP8 (only launched with slots): a kv head's scale needs the amax of its
    // whole row, which is spread over head_dim / 4 threads (not always one
    // warp's, nor aligned to one), so the rotated k and v go through shared
    // memory to one warp per (K or V, kv head).
    if (slot < 0) return;  // (the whole block's row: the barriers below stay uniform)
    __syncthreads();  // every rotation has read its partner dims from the staged k
#pragma unroll
    for (int i = 0; i < kLoads; ++i) {
      const int c = threadIdx.x + i * kThreads;
      if (c >= nq4 && c < n4) row4[c] = v[i];
    }
    if (store_v) row4[n4 + threadIdx.x] = vv;
    __syncthreads();
    const float* kr = row + 4 * nq4;
    const float* vr = row + 4 * n4;
    const int kv_heads = static_cast<int>(a.kv_dim / a.head_dim);
    const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
    for (int job = warp; job < 2 * kv_heads; job += kThreads / kWarp) {
      const bool is_v = job >= kv_heads;
      const int h = is_v ? job - kv_heads : job;
      const int64_t off = static_cast<int64_t>(h) * a.head_dim;
      store_fp8_head((is_v ? vr : kr) + off, a.head_dim,
                     static_cast<uint8_t*>(is_v ? a.v_cache : a.k_cache) + slot_base + off,
                     (is_v ? a.v_scales : a.k_scales) + slot * kv_heads + h, lane);
    }
  }
}

template <DType KT, int kThreads>
cudaError_t launch_typed(const QkNormRopeArgs& a, size_t smem, cudaStream_t stream) {
  cudaError_t e = allow_dynamic_smem(qk_norm_rope_kernel<KT, kThreads>, smem);
  return e != cudaSuccess ? e
                          : launch_pdl(qk_norm_rope_kernel<KT, kThreads>, static_cast<unsigned>(a.T), kThreads, smem,
                                       stream, a);
}

template <DType KT>
cudaError_t launch_cache(const QkNormRopeArgs& a, size_t smem, cudaStream_t stream) {
  constexpr int kWide = 256;
  const bool fits = a.q_dim + a.kv_dim <= 4ll * kLoadsOf<kWide> * kWide && a.kv_dim <= 4ll * kWide;
  return a.T >= kQkWideTokens && fits ? launch_typed<KT, kWide>(a, smem, stream) : launch_typed<KT, 1024>(a, smem, stream);
}

}  // namespace

cudaError_t launch_qk_norm_rope(const QkNormRopeArgs& a, cudaStream_t stream) {
  if (a.rotary_dim / 2 > kQkMaxHalfRotary || a.rotary_dim % 2 != 0 || a.rotary_dim > a.head_dim ||
      a.head_dim % 4 != 0 || a.q_dim % a.head_dim != 0 || a.kv_dim % a.head_dim != 0 ||
      a.q_dim + a.kv_dim > 4ll * kLoadsOf<1024> * 1024 || a.kv_dim > 4ll * 1024)
    return cudaErrorInvalidValue;
  auto aligned = [](const void* w, DType t) {  // load4_any's vector loads
    return !w || reinterpret_cast<uintptr_t>(w) % (t == DType::kF32 ? 16 : t == DType::kBF16 ? 8 : 1) == 0;
  };
  if (!aligned(a.q_norm, a.q_norm_dtype) || !aligned(a.k_norm, a.k_norm_dtype)) return cudaErrorInvalidValue;
  const DType cache = a.slots ? a.cache_dtype : DType::kF32;
  if (cache == DType::kF8E4M3 && (!a.k_scales || !a.v_scales)) return cudaErrorInvalidValue;
  const int64_t staged = a.q_dim + a.kv_dim + (cache == DType::kF8E4M3 ? a.kv_dim : 0);  // floats
  const size_t smem = static_cast<size_t>(staged) * sizeof(float);
  switch (cache) {
    case DType::kBF16: return launch_cache<DType::kBF16>(a, smem, stream);
    case DType::kF32: return launch_cache<DType::kF32>(a, smem, stream);
    case DType::kF8E4M3: return launch_cache<DType::kF8E4M3>(a, smem, stream);
    default: return cudaErrorInvalidValue;
  }
}

}  // namespace m2::cuda
