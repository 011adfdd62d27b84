// Decode attention: one query row per sequence, GQA, head_dim 128, over the
// paged BF16 or FP8 cache.
//
// Block (sequence, kv head, split) reads the split's keys once for all G <= 8
// query heads that share the kv head. Keys and values come in tiles of 64
// through a two-stage cp.async pipeline (a whole tile's loads are in flight
// at once, the next tile's while this one is computed: a short context costs
// one memory round trip, not one per chunk). Each of the 8 warps owns 8 keys
// of a tile, four lanes per key (interleaved 16-byte chunks of the row, so a
// quarter-warp's reads hit 8 distinct bank groups), keeps an online softmax
// per query head and accumulates p · V with each lane owning 4 of the 128
// output dims. The warps' states are merged in shared memory; with several
// splits the block writes its (max, sum, acc) and the last block of the
// (sequence, kv head) to finish merges them all (no second kernel).
//
// The kernel is latency-bound at batch 1 (one block per SM, Nsight Compute:
// 82 % of scheduler cycles with no eligible warp): 8 warps rather than 4 halve
// each warp's serial chain and double the warps that hide each other's
// latencies, and the group size is a template parameter (KG = 6 for MiniMax,
// else 8 with the unused query slots zero) so the per-head chains of
// shuffles and FMAs are independent straight-line code the compiler
// interleaves, not a loop that stops at a run-time G.
//
// FP8 caches: codes are staged as stored; a key's score is multiplied by its
// K scale, its p by the V scale for p · V (the unscaled p goes to the sum).
// fp32 softmax and accumulation throughout (the CPU backend's math).
#include <cfloat>

#include "backend/cuda/runtime/async_copy.cuh"
#include "backend/cuda/attention/attention_split_merge.cuh"
#include "backend/cuda/runtime/common.cuh"
#include "backend/cuda/gemm/gemv.cuh"
#include "backend/cuda/attention/attention.h"

namespace m2::cuda {
namespace {

constexpr int kHd = kDecodeHeadDim;
constexpr int kG = kDecodeMaxGroup;                 // query slots of a split record and of the p rows
constexpr int kThreads = 256, kWarps = kThreads / kWarp;
constexpr int kTile = kDecodeTileKeys;             // keys per pipeline stage
constexpr int kKeysPerWarp = kTile / kWarps;        // 8
constexpr int kLanesPerKey = kWarp / kKeysPerWarp;  // 4
constexpr int kDims = kHd / kWarp;                  // output dims per lane in p · V (4)
static_assert(kThreads == 2 * kHd && kThreads >= 2 * kTile, "two threads per output dim; one scale per thread");
static_assert(kWarps >= kG, "the split merge takes one warp per query head");

template <DType KT>
struct Layout {
  static constexpr int kEs = KT == DType::kBF16 ? 2 : 1;
  static constexpr int kChunks = kHd * kEs / 16;    // 16-byte chunks per cached row
  // Row stride = 64 (mod 128) bytes: lane 4j + h reads chunk 4i + h of key j,
  // so the 8 lanes of a quarter-warp (2 keys x 64 bytes) cover one 128-byte
  // bank window.
  static constexpr int kRowB = kHd * kEs + 64;
  static constexpr int kTileB = kTile * kRowB;
  static constexpr int kScaleB = KT == DType::kF8E4M3 ? 2 * kTile * 4 : 0;  // k then v scales
  static constexpr int kStageB = 2 * kTileB + kScaleB;                   // K rows, V rows, scales
  static constexpr int kQB = kG * kHd * 4;                                // fp32 query vectors
  static constexpr int kPB = kWarps * kKeysPerWarp * kG * 4;              // p per warp and key
  static constexpr int kBytes = kQB + kPB + 2 * kStageB;
  static_assert(kChunks % kLanesPerKey == 0, "whole chunks per lane");
  static_assert(kStageB * 2 >= kWarps * kG * (kHd + 2) * 4, "the warp merge reuses the stages");
};

// The 4 values of a cached row at dims [4 * lane, +4) (V for p · V).
template <DType KT>
__device__ inline float4 load_dims(const uint8_t* row, int lane) {
  if constexpr (KT == DType::kF8E4M3) {
    return decode4<DType::kF8E4M3>(make_uint4(*reinterpret_cast<const uint32_t*>(row + 4 * lane), 0, 0, 0), 0);
  } else {
    const uint2 w = *reinterpret_cast<const uint2*>(row + 8 * lane);
    return make_float4(__uint_as_float(w.x << 16), __uint_as_float(w.x & 0xffff0000u), __uint_as_float(w.y << 16),
                       __uint_as_float(w.y & 0xffff0000u));
  }
}

// Max and sum over the 8 keys of a warp: lanes 4j..4j+3 hold key j's value.
__device__ inline float keys_max(float v) {
#pragma unroll
  for (int o = kLanesPerKey; o < kWarp; o *= 2) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}
__device__ inline float keys_sum(float v) {
#pragma unroll
  for (int o = kLanesPerKey; o < kWarp; o *= 2) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// KG: query slots computed (G <= KG <= kG; slots past G hold zero vectors and
// are never written out).
template <DType KT, int KG>
__global__ void __launch_bounds__(kThreads) attention_decode_kernel(AttentionArgs a) {
  using L = Layout<KT>;
  extern __shared__ __align__(16) uint8_t smem[];
  float* qs = reinterpret_cast<float*>(smem);                   // [kG][kHd]
  float* ps = reinterpret_cast<float*>(smem + L::kQB);          // [kWarps][kKeysPerWarp][kG]
  uint8_t* stages = smem + L::kQB + L::kPB;                     // 2 x kStageB

  // Launched early (launch_pdl): the next kernel (o_proj) may start at once
  // and pull its weights into L2 while this latency-bound kernel runs. Before
  // the wait for the QK step, the first tile's keys that earlier steps wrote
  // are requested (the sequence and its block table were uploaded before the
  // step); after it, the query vectors and this step's key (position
  // context_len - 1), which the QK step writes into the cache.
  allow_dependents();
  const AttnSeq sq = a.seqs[blockIdx.x];
  const int kvh = blockIdx.y, split = blockIdx.z, G = a.group;
  const int n_keys = sq.context_len;  // one row at position context_len - 1 sees every key
  const KeyRange keys = split_key_range(n_keys, split, a.splits, kTile);
  const int k_begin = keys.begin, k_end = keys.end;
  const int n_tiles = k_end > k_begin ? (k_end - k_begin + kTile - 1) / kTile : 0;
  const int tid = threadIdx.x, warp = tid / kWarp, lane = tid % kWarp;
  const int64_t q_ld = static_cast<int64_t>(a.kv_heads) * G * kHd;
  const int32_t* table = a.block_tables + sq.table_offset;
  const int64_t token_ld = static_cast<int64_t>(a.kv_heads) * kHd;  // elements per cache slot

  // Issues tile t's K and V rows (and FP8 scales) into stage t % 2, but for
  // key `skip`. The block-table reads all come first: an asm cp.async is a
  // compiler barrier, so a read between two of them would cost a memory
  // round trip each.
  auto slot_of = [&](int key) {
    return key < k_end ? static_cast<int64_t>(table[key / a.block_size]) * a.block_size + key % a.block_size : 0;
  };
  auto load_tile = [&](int t, int skip) {
    uint8_t* st = stages + (t % 2) * L::kStageB;
    const int k0 = k_begin + t * kTile;
    constexpr int kIters = kTile * L::kChunks / kThreads;  // chunk c = tid + i * kThreads is of key c / kChunks
    int64_t slot[kIters];
#pragma unroll
    for (int i = 0; i < kIters; ++i) slot[i] = slot_of(k0 + (tid + i * kThreads) / L::kChunks);
    const int64_t scale_slot = KT == DType::kF8E4M3 ? slot_of(k0 + tid % kTile) : 0;
#pragma unroll
    for (int i = 0; i < kIters; ++i) {
      const int c = tid + i * kThreads, j = c / L::kChunks, part = c % L::kChunks;
      if (k0 + j == skip) continue;
      const bool ok = k0 + j < k_end;
      const int64_t off = (slot[i] * token_ld + static_cast<int64_t>(kvh) * kHd) * L::kEs + part * 16;
      cp_async16(st + j * L::kRowB + part * 16, static_cast<const uint8_t*>(a.k_cache) + off, ok);
      cp_async16(st + L::kTileB + j * L::kRowB + part * 16, static_cast<const uint8_t*>(a.v_cache) + off, ok);
    }
    if constexpr (KT == DType::kF8E4M3) {  // thread i < kTile: K scale of key i; < 2 kTile: V scale of key i - kTile
      if (tid < 2 * kTile && k0 + tid % kTile != skip) {
        const float* src = (tid < kTile ? a.k_scales : a.v_scales) + scale_slot * a.kv_heads + kvh;
        cp_async4(st + 2 * L::kTileB + tid * 4, src, k0 + tid % kTile < k_end);
      }
    }
  };

  const int new_key = n_keys - 1;
  if (n_tiles > 0) load_tile(0, new_key);
  grid_dependency_wait();
  // The G query vectors of this kv head are contiguous in q: G * 32 chunks
  // (slots past G: zeros).
  const float* q_src = a.q + sq.first_row * q_ld + static_cast<int64_t>(kvh) * G * kHd;
  for (int c = tid; c < kG * kHd / 4; c += kThreads)
    cp_async16(qs + 4 * c, q_src + (c < G * kHd / 4 ? 4 * c : 0), c < G * kHd / 4);
  if (n_tiles > 0 && new_key >= k_begin && new_key < k_begin + kTile) {  // this step's key, in tile 0
    const int j = new_key - k_begin;
    const int64_t slot = slot_of(new_key);
    const int64_t off = (slot * token_ld + static_cast<int64_t>(kvh) * kHd) * L::kEs;
    if (tid < 2 * L::kChunks) {  // K chunks, then V chunks
      const int part = tid % L::kChunks;
      cp_async16(stages + (tid < L::kChunks ? 0 : L::kTileB) + j * L::kRowB + part * 16,
                 static_cast<const uint8_t*>(tid < L::kChunks ? a.k_cache : a.v_cache) + off + part * 16, true);
    }
    if constexpr (KT == DType::kF8E4M3) {
      if (tid == 2 * L::kChunks || tid == 2 * L::kChunks + 1) {
        const bool is_v = tid == 2 * L::kChunks + 1;
        cp_async4(stages + 2 * L::kTileB + ((is_v ? kTile : 0) + j) * 4,
                  (is_v ? a.v_scales : a.k_scales) + slot * a.kv_heads + kvh, true);
      }
    }
  }
  cp_async_commit();

  float m[KG], l[KG], acc[KG][kDims];
#pragma unroll
  for (int v = 0; v < KG; ++v) {
    m[v] = -FLT_MAX, l[v] = 0.0f;
#pragma unroll
    for (int d = 0; d < kDims; ++d) acc[v][d] = 0.0f;
  }
  const int jw = lane / kLanesPerKey, h = lane % kLanesPerKey;  // this lane's key within the warp, and quarter of the row
  float* pw = ps + warp * kKeysPerWarp * kG;

  for (int t = 0; t < n_tiles; ++t) {
    if (t + 1 < n_tiles) load_tile(t + 1, -1);
    cp_async_commit();
    cp_async_wait<1>();
    __syncthreads();
    const uint8_t* st = stages + (t % 2) * L::kStageB;
    const int j = warp * kKeysPerWarp + jw, key = k_begin + t * kTile + j;
    const bool valid = key < k_end;

    // Scores of key j against the KG vectors (this lane's quarter of the dims).
    float s[KG];
#pragma unroll
    for (int v = 0; v < KG; ++v) s[v] = 0.0f;
    const uint8_t* krow = st + j * L::kRowB;
#pragma unroll
    for (int i = 0; i < L::kChunks / kLanesPerKey; ++i) {
      const int chunk = kLanesPerKey * i + h;
      const uint4 kc = *reinterpret_cast<const uint4*>(krow + chunk * 16);
      constexpr int kPer = 16 / L::kEs;  // dims per chunk
#pragma unroll
      for (int c = 0; c < kPer / 4; ++c) {
        const float4 kk = decode4<KT>(kc, c);
#pragma unroll
        for (int v = 0; v < KG; ++v) {
          const float4 qq = *reinterpret_cast<const float4*>(qs + v * kHd + chunk * kPer + 4 * c);
          s[v] = dot4(qq, kk, s[v]);
        }
      }
    }
    float k_scale = 1.0f, v_scale = 1.0f;
    if constexpr (KT == DType::kF8E4M3) {
      k_scale = reinterpret_cast<const float*>(st + 2 * L::kTileB)[j];
      v_scale = reinterpret_cast<const float*>(st + 2 * L::kTileB)[kTile + j];
    }
    // Online softmax per vector over the warp's 8 keys (each key on 4 lanes).
#pragma unroll
    for (int v = 0; v < KG; ++v) {
      float both = s[v] + __shfl_xor_sync(0xffffffffu, s[v], 1);
      both += __shfl_xor_sync(0xffffffffu, both, 2);
      const float sv = valid ? both * (a.scale * k_scale) : -FLT_MAX;
      const float m_new = fmaxf(m[v], keys_max(sv));
      const float p = valid ? expf(sv - m_new) : 0.0f;
      const float corr = expf(m[v] - m_new);
      l[v] = fmaf(l[v], corr, keys_sum(p));
#pragma unroll
      for (int d = 0; d < kDims; ++d) acc[v][d] *= corr;
      m[v] = m_new;
      if (h == 0) pw[jw * kG + v] = p * v_scale;
    }
    __syncwarp();
    // acc += p · V over the warp's keys; this lane owns dims [4 * lane, +4).
    const uint8_t* vbase = st + L::kTileB + warp * kKeysPerWarp * L::kRowB;
#pragma unroll
    for (int jj = 0; jj < kKeysPerWarp; ++jj) {
      const float4 vv = load_dims<KT>(vbase + jj * L::kRowB, lane);
      const float4 p0 = *reinterpret_cast<const float4*>(pw + jj * kG);
      const float4 p1 = *reinterpret_cast<const float4*>(pw + jj * kG + 4);
      const float pv[kG] = {p0.x, p0.y, p0.z, p0.w, p1.x, p1.y, p1.z, p1.w};
#pragma unroll
      for (int v = 0; v < KG; ++v) {
        acc[v][0] = fmaf(pv[v], vv.x, acc[v][0]);
        acc[v][1] = fmaf(pv[v], vv.y, acc[v][1]);
        acc[v][2] = fmaf(pv[v], vv.z, acc[v][2]);
        acc[v][3] = fmaf(pv[v], vv.w, acc[v][3]);
      }
    }
    __syncthreads();  // the stage is refilled by the next iteration's loads
  }
  cp_async_wait<0>();  // the query vectors, when there were no tiles

  // Merge the warps (the stages hold their states now).
  float* wst = reinterpret_cast<float*>(stages);  // [kWarps][kG][kHd + 2]: acc, then m, l
#pragma unroll
  for (int v = 0; v < KG; ++v) {
    float* rec = wst + (warp * kG + v) * (kHd + 2);
#pragma unroll
    for (int d = 0; d < kDims; ++d) rec[kDims * lane + d] = acc[v][d];
    if (lane == 0) rec[kHd] = m[v], rec[kHd + 1] = l[v];
  }
  __syncthreads();
  // Two threads per output dim: thread (half, d) takes the vectors v = half, half + 2, ...
  const int d = tid % kHd, half = tid / kHd;
  const int64_t pair = static_cast<int64_t>(blockIdx.x) * a.kv_heads + kvh;  // (sequence, kv head)
#pragma unroll
  for (int v0 = 0; v0 < KG; v0 += 2) {
    const int v = v0 + half;
    if (v >= G) break;
    float M = -FLT_MAX;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) M = fmaxf(M, wst[(w * kG + v) * (kHd + 2) + kHd]);
    float Ls = 0.0f, A = 0.0f;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) {
      const float* rec = wst + (w * kG + v) * (kHd + 2);
      const float c = expf(rec[kHd] - M);
      Ls = fmaf(rec[kHd + 1], c, Ls);
      A = fmaf(rec[d], c, A);
    }
    if (a.splits == 1) {
      a.out[sq.first_row * q_ld + (static_cast<int64_t>(kvh) * G + v) * kHd + d] = A / Ls;
    } else {
      store_split_record(a.partials + (pair * a.splits + split) * kSplitRecord, v, d, M, Ls, A);
    }
  }
  if (a.splits == 1) return;

  // The last block of this (sequence, kv head) merges every split.
  merge_split_records<KG, kThreads>(a, pair, G, a.out + sq.first_row * q_ld + static_cast<int64_t>(kvh) * G * kHd,
                                    reinterpret_cast<float*>(stages));
}

template <DType KT, int KG>
cudaError_t launch_group(const AttentionArgs& a, cudaStream_t stream) {
  const size_t smem = Layout<KT>::kBytes;
  cudaError_t e = allow_dynamic_smem(attention_decode_kernel<KT, KG>, smem);
  if (e != cudaSuccess) return e;
  const dim3 grid(static_cast<unsigned>(a.num_items), static_cast<unsigned>(a.kv_heads),
                  static_cast<unsigned>(a.splits));
  return launch_pdl(attention_decode_kernel<KT, KG>, grid, kThreads, smem, stream, a);
}

// MiniMax-M2's group (48 query heads over 8 kv heads) exactly; any other in
// the 8 slots.
template <DType KT>
cudaError_t launch_typed(const AttentionArgs& a, cudaStream_t stream) {
  return a.group == 6 ? launch_group<KT, 6>(a, stream) : launch_group<KT, kG>(a, stream);
}

}  // namespace

bool attention_decode_supports(DType dtype, int head_dim, int group) {
  return (dtype == DType::kBF16 || dtype == DType::kF8E4M3) && head_dim == kHd && group >= 1 && group <= kG;
}

size_t attention_decode_partial_floats(int64_t seqs, int kv_heads, int splits) {
  return static_cast<size_t>(seqs) * kv_heads * splits * kSplitRecord;
}

cudaError_t launch_attention_decode(const AttentionArgs& a, cudaStream_t stream) {
  if (!attention_decode_supports(a.dtype, a.head_dim, a.group) || a.splits < 1 ||
      (a.splits > 1 && (!a.partials || !a.counters)))
    return cudaErrorInvalidValue;
  if (a.num_items == 0) return cudaSuccess;
  switch (a.dtype) {
    case DType::kF8E4M3:
      if (!a.k_scales || !a.v_scales) return cudaErrorInvalidValue;
      return launch_typed<DType::kF8E4M3>(a, stream);
    case DType::kBF16: return launch_typed<DType::kBF16>(a, stream);
    default: return cudaErrorInvalidValue;
  }
}

}  // namespace m2::cuda
