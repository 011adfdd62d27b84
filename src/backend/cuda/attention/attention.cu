// Causal GQA attention over the paged KV cache (fp32 softmax, online).
//
// Work item: up to 8 (row, q head) vectors of one sequence that share a kv
// head; a decode row of M2 is one item of 6 vectors, a prefill chunk is
// rows * 6 / 8 items. Block (item, kv head, split) handles the split's keys
// [split * split_keys, ...) of the item: 4 warps take 32-key tiles in turn;
// a warp stages its tile's keys and values in shared memory, each lane
// scores one key against the 8 vectors, and after an online-softmax update
// the warp adds p · V with each lane owning head_dim / 32 output dims. The warps' states
// are merged at the end; with several splits (long contexts, few rows) the
// partial (max, sum, acc) go to memory and attention_merge_kernel combines
// them (split-K "flash decoding").
//
// FP8 caches: the codes are staged as stored; a lane multiplies its key's
// scores by the key's K scale and its p by the V scale (p · scale goes to
// p · V, the unscaled p to the softmax sum).
//
// SIMT fp32 throughout. Over BF16/FP8 caches of head_dim 128, prefill chunks
// run on tensor cores (attention_prefill.cu) and one-row decode sequences in
// attention_decode.cu; this kernel is the general fallback (short chunks,
// F32 caches, other head dims and groups).
#include <cfloat>

#include "backend/cuda/runtime/common.cuh"
#include "backend/cuda/gemm/gemv.cuh"
#include "backend/cuda/attention/attention.h"

namespace m2::cuda {
namespace {

constexpr int kWarps = 4;
constexpr int kThreads = kWarps * kWarp;
constexpr int kTileKeys = 32;
constexpr int kV = kAttnVectors;
constexpr int kMaxDpl = kAttnMaxHeadDim / kWarp;  // output dims per lane

template <DType KT>
constexpr int kEsize = KT == DType::kF32 ? 4 : KT == DType::kBF16 ? 2 : 1;

// Elements i..i+3 of a cache row (4-, 8- or 16-byte aligned).
template <DType KT>
__device__ inline float4 load_kv4(const void* p, int64_t i) {
  if constexpr (KT == DType::kF8E4M3) {
    const uint32_t w = *reinterpret_cast<const uint32_t*>(static_cast<const uint8_t*>(p) + i);
    return decode4<DType::kF8E4M3>(make_uint4(w, 0, 0, 0), 0);
  } else if constexpr (KT == DType::kBF16) {
    const uint2 w = *reinterpret_cast<const uint2*>(static_cast<const uint16_t*>(p) + i);
    return make_float4(__uint_as_float(w.x << 16), __uint_as_float(w.x & 0xffff0000u), __uint_as_float(w.y << 16),
                       __uint_as_float(w.y & 0xffff0000u));
  } else {
    return *reinterpret_cast<const float4*>(static_cast<const float*>(p) + i);
  }
}

// The kPer16 values of a 16-byte chunk of a cache row.
template <DType KT>
__device__ inline void decode_chunk(const uint4& c, float (&out)[Stored<KT>::kPer16]) {
  if constexpr (KT == DType::kF8E4M3) {
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const float4 f = decode4<KT>(c, j);
      out[4 * j] = f.x, out[4 * j + 1] = f.y, out[4 * j + 2] = f.z, out[4 * j + 3] = f.w;
    }
  } else {
    Stored<KT>::decode(c, out);
  }
}

// Bytes of one staged K or V row: head_dim elements + 16 bytes of padding, so
// that 8 lanes reading 16 bytes of 8 consecutive rows hit distinct banks.
template <DType KT>
__host__ __device__ inline int staged_key_bytes(int head_dim) {
  return head_dim * kEsize<KT> + 16;
}

template <DType KT>
__global__ void __launch_bounds__(kThreads) attention_kernel(AttentionArgs a) {
  extern __shared__ __align__(16) uint8_t smem[];  // per warp: kTileKeys staged K rows, then V rows
  __shared__ __align__(16) float qs[kV][kAttnMaxHeadDim];
  __shared__ __align__(16) float ps[kWarps][kTileKeys][kV];  // p of key j for each vector
  __shared__ float ms[kWarps][kV], ls[kWarps][kV];

  const AttnItem item = a.items[blockIdx.x];
  const AttnSeq sq = a.seqs[item.seq];
  const int kvh = blockIdx.y, split = blockIdx.z;
  const int G = a.group, hd = a.head_dim, heads = a.kv_heads * G;
  const int n_vec = min(kV, sq.num_rows * G - item.first_vector);
  const int first_pos = sq.context_len - sq.num_rows;  // position of the sequence's first row in this step
  const int last_row = (item.first_vector + n_vec - 1) / G;
  const int n_keys = first_pos + last_row + 1;
  const int k_begin = split * a.split_keys, k_end = min(n_keys, k_begin + a.split_keys);
  const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
  const int dpl = hd / kWarp;
  const int64_t q_ld = static_cast<int64_t>(heads) * hd;
  auto vec_row = [&](int v) { return (item.first_vector + v) / G; };  // row within the sequence
  auto vec_head = [&](int v) { return kvh * G + (item.first_vector + v) % G; };

  for (int i = threadIdx.x; i < kV * hd; i += kThreads) {
    const int v = i / hd, d = i % hd;
    qs[v][d] = v < n_vec ? a.q[(sq.first_row + vec_row(v)) * q_ld + vec_head(v) * hd + d] : 0.0f;
  }
  __syncthreads();

  float m[kV], l[kV], acc[kV][kMaxDpl];
#pragma unroll
  for (int v = 0; v < kV; ++v) {
    m[v] = -FLT_MAX, l[v] = 0.0f;
#pragma unroll
    for (int d = 0; d < kMaxDpl; ++d) acc[v][d] = 0.0f;
  }
  const int row_bytes = staged_key_bytes<KT>(hd);
  uint8_t* ks = smem + warp * 2 * kTileKeys * row_bytes;
  uint8_t* vs = ks + kTileKeys * row_bytes;
  const int chunks_per_key = hd * kEsize<KT> / 16;
  const int32_t* table = a.block_tables + sq.table_offset;
  const int64_t head_off = static_cast<int64_t>(kvh) * hd;
  const int64_t token_ld = static_cast<int64_t>(a.kv_heads) * hd;  // elements per cache slot

  for (int tile = k_begin + warp * kTileKeys; tile < k_end; tile += kWarps * kTileKeys) {
    const int n_tile = min(kTileKeys, k_end - tile);
    const int key = tile + lane;
    const int64_t my_slot =
        lane < n_tile ? static_cast<int64_t>(table[key / a.block_size]) * a.block_size + key % a.block_size : 0;
    float k_scale = 1.0f, v_scale = 1.0f;  // this lane's key's FP8 scales
    if constexpr (KT == DType::kF8E4M3) {
      if (lane < n_tile) k_scale = a.k_scales[my_slot * a.kv_heads + kvh], v_scale = a.v_scales[my_slot * a.kv_heads + kvh];
    }
    // Stage this tile's keys and values (16-byte chunks, consecutive lanes on
    // consecutive chunks). The loads of kBatch chunks are issued before any
    // is stored, so a tile costs a few memory round trips, not one per chunk
    // (the loop bound is the same for every lane: whole warps take part in
    // the shuffles).
    constexpr int kBatch = 4;
    const int n_chunks = kTileKeys * chunks_per_key;
    for (int c0 = 0; c0 < n_chunks; c0 += kBatch * kWarp) {
      uint4 kc[kBatch], vc[kBatch];
#pragma unroll
      for (int b = 0; b < kBatch; ++b) {
        kc[b] = vc[b] = make_uint4(0, 0, 0, 0);
        const int c = c0 + b * kWarp + lane;
        if (c0 + b * kWarp >= n_chunks) continue;  // uniform over the warp
        const int j = c / chunks_per_key, part = c % chunks_per_key;
        const int64_t slot = __shfl_sync(0xffffffffu, my_slot, j);
        if (j < n_tile) {
          const int64_t off = (slot * token_ld + head_off) * kEsize<KT> + part * 16;
          kc[b] = *reinterpret_cast<const uint4*>(static_cast<const uint8_t*>(a.k_cache) + off);
          vc[b] = *reinterpret_cast<const uint4*>(static_cast<const uint8_t*>(a.v_cache) + off);
        }
      }
#pragma unroll
      for (int b = 0; b < kBatch; ++b) {
        const int c = c0 + b * kWarp + lane;
        if (c0 + b * kWarp >= n_chunks) continue;
        const int j = c / chunks_per_key, part = c % chunks_per_key;
        *reinterpret_cast<uint4*>(ks + j * row_bytes + part * 16) = kc[b];
        *reinterpret_cast<uint4*>(vs + j * row_bytes + part * 16) = vc[b];
      }
    }
    __syncwarp();

    // Scores of this lane's key for the 8 vectors.
    float s[kV];
#pragma unroll
    for (int v = 0; v < kV; ++v) s[v] = 0.0f;
    constexpr int kPer16 = Stored<KT>::kPer16;
    for (int d = 0; d < hd; d += kPer16) {
      float kk[kPer16];
      decode_chunk<KT>(*reinterpret_cast<const uint4*>(ks + lane * row_bytes + d * kEsize<KT>), kk);
#pragma unroll
      for (int v = 0; v < kV; ++v) {
#pragma unroll
        for (int c = 0; c < kPer16; c += 4) {
          const float4 qq = *reinterpret_cast<const float4*>(&qs[v][d + c]);
          s[v] = fmaf(qq.w, kk[c + 3], fmaf(qq.z, kk[c + 2], fmaf(qq.y, kk[c + 1], fmaf(qq.x, kk[c], s[v]))));
        }
      }
    }
    // Online softmax update per vector (causal: vector v sees keys <= its position).
#pragma unroll
    for (int v = 0; v < kV; ++v) {
      const bool valid = lane < n_tile && key <= first_pos + vec_row(v);
      const float sv = valid ? s[v] * (a.scale * k_scale) : -FLT_MAX;
      const float m_new = fmaxf(m[v], warp_max(sv));
      const float p = valid ? expf(sv - m_new) : 0.0f;
      const float corr = expf(m[v] - m_new);
      l[v] = fmaf(l[v], corr, warp_sum(p));
#pragma unroll
      for (int d = 0; d < kMaxDpl; ++d) acc[v][d] *= corr;
      m[v] = m_new;
      ps[warp][lane][v] = p * v_scale;
    }
    __syncwarp();

    // acc += p · V over the tile's keys; this lane owns dims [lane * dpl, +dpl).
    for (int j = 0; j < n_tile; ++j) {
      const uint8_t* vrow = vs + j * row_bytes;
      float vv[kMaxDpl];
      if (dpl == 4) {
        const float4 f = load_kv4<KT>(vrow, lane * 4);
        vv[0] = f.x, vv[1] = f.y, vv[2] = f.z, vv[3] = f.w;
      } else {
#pragma unroll
        for (int d = 0; d < kMaxDpl; ++d) vv[d] = d < dpl ? Stored<KT>::load1(vrow, lane * dpl + d) : 0.0f;
      }
      const float4 p0 = *reinterpret_cast<const float4*>(&ps[warp][j][0]);
      const float4 p1 = *reinterpret_cast<const float4*>(&ps[warp][j][4]);
      const float pv[kV] = {p0.x, p0.y, p0.z, p0.w, p1.x, p1.y, p1.z, p1.w};
#pragma unroll
      for (int v = 0; v < kV; ++v)
#pragma unroll
        for (int d = 0; d < kMaxDpl; ++d) acc[v][d] = fmaf(pv[v], vv[d], acc[v][d]);
    }
    __syncwarp();
  }

  // Merge the warps' states (the staged keys' memory now holds their acc).
  __syncthreads();
  float* macc = reinterpret_cast<float*>(smem);  // [kWarps][kV][hd]
#pragma unroll
  for (int v = 0; v < kV; ++v) {
    if (lane == 0) ms[warp][v] = m[v], ls[warp][v] = l[v];
#pragma unroll
    for (int d = 0; d < kMaxDpl; ++d)
      if (d < dpl) macc[(warp * kV + v) * hd + lane * dpl + d] = acc[v][d];
  }
  __syncthreads();
  for (int i = threadIdx.x; i < n_vec * hd; i += kThreads) {
    const int v = i / hd, d = i % hd;
    float M = -FLT_MAX;
    for (int w = 0; w < kWarps; ++w) M = fmaxf(M, ms[w][v]);
    float L = 0.0f, A = 0.0f;
    for (int w = 0; w < kWarps; ++w) {
      const float c = expf(ms[w][v] - M);
      L = fmaf(ls[w][v], c, L);
      A = fmaf(macc[(w * kV + v) * hd + d], c, A);
    }
    const int64_t row = sq.first_row + vec_row(v);
    const int head = vec_head(v);
    if (a.splits == 1) {
      a.out[row * q_ld + head * hd + d] = A / L;
    } else {
      // Partials per (item, kv head, vector), not per row of q: a few items
      // split (attention_splits), however many rows the step has.
      const int64_t n = a.num_items * a.kv_heads * kV * a.splits;
      const int64_t idx = ((int64_t{blockIdx.x} * a.kv_heads + kvh) * kV + v) * a.splits + split;
      if (d == 0) a.partials[idx] = M, a.partials[n + idx] = L;
      a.partials[2 * n + idx * hd + d] = A;
    }
  }
}

// out[row, head] = Σ_s A_s e^{M_s - M} / Σ_s L_s e^{M_s - M}; grid (items,
// kv heads), hd threads: only the vectors of this kernel's items. (A grid of
// every row of q, T * heads, also overwrote the rows of sequences that the
// tensor-core prefill kernel had already written, with partials nobody wrote:
// NaN / garbage for every prefill row of a step that mixes both kernels.)
__global__ void attention_merge_kernel(AttentionArgs a) {
  const AttnItem item = a.items[blockIdx.x];
  const AttnSeq sq = a.seqs[item.seq];
  const int kvh = blockIdx.y, G = a.group, heads = a.kv_heads * G, hd = a.head_dim, S = a.splits;
  const int n_vec = min(kV, sq.num_rows * G - item.first_vector);
  const int64_t n = a.num_items * a.kv_heads * kV * S;
  for (int v = 0; v < n_vec; ++v) {
    const int64_t row = sq.first_row + (item.first_vector + v) / G;
    const int64_t rh = row * heads + kvh * G + (item.first_vector + v) % G;  // row * heads + head
    const int64_t iv = (int64_t{blockIdx.x} * a.kv_heads + kvh) * kV + v;     // the kernel's partial slot
    const float* pm = a.partials + iv * S;
    const float* pl = a.partials + n + iv * S;
    const float* pa = a.partials + 2 * n + iv * S * hd;
    float M = -FLT_MAX;
    for (int s = 0; s < S; ++s) M = fmaxf(M, pm[s]);
    for (int d = threadIdx.x; d < hd; d += blockDim.x) {
      float L = 0.0f, A = 0.0f;
      for (int s = 0; s < S; ++s) {
        const float c = expf(pm[s] - M);
        L = fmaf(pl[s], c, L);
        A = fmaf(pa[s * hd + d], c, A);
      }
      a.out[rh * hd + d] = A / L;
    }
  }
}

template <DType KT>
cudaError_t launch_typed(const AttentionArgs& a, cudaStream_t stream) {
  const size_t smem = static_cast<size_t>(kWarps) * 2 * kTileKeys * staged_key_bytes<KT>(a.head_dim);
  cudaError_t e = allow_dynamic_smem(attention_kernel<KT>, smem);
  if (e != cudaSuccess) return e;
  const dim3 grid(static_cast<unsigned>(a.num_items), static_cast<unsigned>(a.kv_heads),
                  static_cast<unsigned>(a.splits));
  attention_kernel<KT><<<grid, kThreads, smem, stream>>>(a);
  if (a.splits > 1)  // over the same items as attention_kernel (not every row of q: see the merge kernel)
    attention_merge_kernel<<<dim3(static_cast<unsigned>(a.num_items), static_cast<unsigned>(a.kv_heads)), 128, 0,
                             stream>>>(a);
  return cudaGetLastError();
}

}  // namespace

size_t attention_partial_floats(int64_t items, int kv_heads, int head_dim, int splits) {
  return static_cast<size_t>(items) * kv_heads * kV * splits * (head_dim + 2);
}

cudaError_t launch_attention(const AttentionArgs& a, cudaStream_t stream) {
  if (a.head_dim % kWarp != 0 || a.head_dim > kAttnMaxHeadDim || a.group < 1 || a.split_keys <= 0)
    return cudaErrorInvalidValue;
  switch (a.dtype) {
    case DType::kF8E4M3:
      if (!a.k_scales || !a.v_scales) return cudaErrorInvalidValue;
      return launch_typed<DType::kF8E4M3>(a, stream);
    case DType::kBF16: return launch_typed<DType::kBF16>(a, stream);
    case DType::kF32: return launch_typed<DType::kF32>(a, stream);
    default: return cudaErrorInvalidValue;
  }
}

}  // namespace m2::cuda
