// Decode attention on tensor cores: one query row per sequence, GQA group
// <= 8, head_dim 128, BF16 or FP8 cache, block (sequence, kv head, split) over
// the split's keys. Without a split (batches that fill the GPU) a block writes
// its output; with splits (long contexts at small batches) it writes a record
// and the last block of the pair merges them (attention_split_merge.cuh, the
// SIMT kernel's records). The backend's choice: attention_decode_on_mma.
//
// Why: the SIMT decode kernel (attention_decode.cu) is built for batch 1's
// latency: per key and query head it reads q from shared memory and sums in
// shuffles, so at batch 256 x 1K context it is shared-memory bound (~600 µs
// a layer on an H200 against ~250 µs to read the 1.07 GB of K and V). Here
// the group's G query vectors are the rows of an m16n8k16 A operand (rows
// G..15 zero), held in registers as bf16 for the whole block, and each warp
// takes 16 keys of every 64-key tile:
//   S [16 x 16] = Q Kᵀ   (8 ldmatrix.x4 of K rows, 16 mma),
//   online softmax in base 2 per row (a quad of lanes holds a row),
//   O [16 x 128] += P V  (P from the S accumulators as bf16 A fragments,
//                         8 ldmatrix.x4.trans of V rows, 16 mma).
// Tiles come through a 3-stage cp.async pipeline gathered via the block
// table. The 4 warps' (max, sum, O) are merged in shared memory at the end.
//
// FP8 caches: the codes land as stored (with their per-key scales), and each
// warp converts its own 16 keys of K and V to bf16 (exact) in a shared
// memory area of its own before its ldmatrix reads (no block barrier); a
// key's score is multiplied by its K scale, its p by the V scale for P V
// (the unscaled p goes to the sum), as the prefill kernel does.
//
// Rounding, as the prefill kernel's: Q and P to bf16 (relative 2^-9 each),
// everything else fp32 (the test's tensor-core bound).
#include <cmath>

#include "backend/cuda/runtime/async_copy.cuh"
#include "backend/cuda/attention/attention_split_merge.cuh"
#include "backend/cuda/gemm/bf16_mma.cuh"
#include "backend/cuda/runtime/common.cuh"
#include "backend/cuda/attention/attention.h"

namespace m2::cuda {
namespace {

constexpr int kHd = kDecodeHeadDim;        // 128
constexpr int kWarps = 4, kThreads = kWarps * kWarp;
constexpr int kTile = kDecodeTileKeys;     // 64 keys per stage
constexpr int kKeysPerWarp = kTile / kWarps;  // 16: one m16n8k16 k-step of P V
constexpr int kStages = 3;
constexpr int kMaxSplits = 1024;  // key splits of a (sequence, kv head): the backend's are ~2 x SMs / kv heads
constexpr int kRowB = kHd * 2 + 16;        // bytes of a bf16 K or V row in shared memory: 8 ldmatrix rows hit distinct banks
constexpr int kRec = kHd + 2;              // a warp's row in the merge: O, then max and sum
static_assert(kKeysPerWarp == 16, "a warp's keys are one k-step of P V");
static_assert(kDecodeMaxGroup <= 8, "query rows are the g rows of the fragments (rows g + 8 are padding)");
static_assert(kThreads == kHd, "the merge takes one thread per output dim");
static_assert(kThreads == 2 * kTile, "one FP8 scale per thread");

// Shared memory: kStages stages of K rows, V rows (as stored: BF16 rows
// padded to kRowB, FP8 rows unpadded) and, for FP8, the K then V scales; for
// FP8 then each warp's bf16 K and V rows of its 16 keys.
template <DType KT>
struct Layout {
  static constexpr bool kFp8 = KT == DType::kF8E4M3;
  static constexpr int kEs = kFp8 ? 1 : 2;
  static constexpr int kChunks = kHd * kEs / 16;            // 16-byte chunks per cached row
  static constexpr int kRawRowB = kFp8 ? kHd : kRowB;
  static constexpr int kRawTileB = kTile * kRawRowB;
  static constexpr int kScaleB = kFp8 ? 2 * kTile * 4 : 0;
  static constexpr int kStageB = 2 * kRawTileB + kScaleB;
  static constexpr int kLoads = kTile * kChunks / kThreads;  // chunks of K (and of V) per thread per tile
  static constexpr int kConvOff = kStages * kStageB;
  static constexpr int kWarpConvB = 2 * kKeysPerWarp * kRowB;  // a warp's bf16 K, then V rows
  static constexpr size_t kBytes = kConvOff + (kFp8 ? kWarps * kWarpConvB : 0);
  static_assert(kWarps * 8 * kRec * 4 + kMaxSplits * kSplitSlots * 4 <= kStages * kStageB,
                "the merges reuse the stages (the warps' records, then the splits' weights)");
};

template <DType KT>
__global__ void __launch_bounds__(kThreads) attention_decode_mma_kernel(AttentionArgs a) {
  using L = Layout<KT>;
  extern __shared__ __align__(16) uint8_t smem[];
  // Launched early (launch_pdl), as the SIMT kernel: o_proj may start and
  // pull its weights into L2 while this runs.
  allow_dependents();
  grid_dependency_wait();
  const AttnSeq sq = a.seqs[blockIdx.x];
  const int kvh = blockIdx.y, split = blockIdx.z, G = a.group;
  const int n_keys = sq.context_len;  // the row at position context_len - 1 sees every key
  // This block's keys [k_begin, k_end) (all of them without a split).
  const KeyRange keys = split_key_range(n_keys, split, a.splits, kTile);
  const int k_begin = keys.begin, k_end = keys.end;
  const int n_tiles = k_end > k_begin ? (k_end - k_begin + kTile - 1) / kTile : 0;
  const int tid = threadIdx.x, warp = tid / kWarp, lane = tid % kWarp;
  const int g = lane / 4, t = lane % 4;
  const int64_t q_ld = static_cast<int64_t>(a.kv_heads) * G * kHd;
  const int64_t token_ld = static_cast<int64_t>(a.kv_heads) * kHd;  // elements per cache slot

  // Q as bf16 A fragments, qf[c] for dims [16c, 16c + 16): row g is query
  // vector g of the group (zero past G), row g + 8 zero.
  const float* q_src = a.q + sq.first_row * q_ld + static_cast<int64_t>(kvh) * G * kHd + g * kHd;
  uint32_t qf[kHd / 16][4];
#pragma unroll
  for (int c = 0; c < kHd / 16; ++c) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const float2 x = g < G ? *reinterpret_cast<const float2*>(q_src + 16 * c + 8 * h + 2 * t) : make_float2(0.f, 0.f);
      qf[c][2 * h] = pack_bf16(x.x, x.y);
      qf[c][2 * h + 1] = 0;
    }
  }

  // Tile `tile` into stage tile % kStages: thread tid copies chunk tid % 16
  // of keys tid / 16 + 8 i; the block-table reads first (an asm cp.async is
  // a compiler barrier: a read between two would cost a round trip each).
  // Keys past the context read as zeros (masked below).
  const PagedSlots slot(a.block_tables + sq.table_offset, a.block_size);
  auto slot_of = [&](int key) -> int64_t { return key < k_end ? slot(key) : 0; };
  auto load_tile = [&](int tile) {
    uint8_t* st = smem + (tile % kStages) * L::kStageB;
    const int k0 = k_begin + tile * kTile, part = tid % L::kChunks;
    int64_t slot[L::kLoads];
#pragma unroll
    for (int i = 0; i < L::kLoads; ++i) slot[i] = slot_of(k0 + tid / L::kChunks + i * (kThreads / L::kChunks));
    const int64_t scale_slot = L::kFp8 ? slot_of(k0 + tid % kTile) : 0;
#pragma unroll
    for (int i = 0; i < L::kLoads; ++i) {
      const int j = tid / L::kChunks + i * (kThreads / L::kChunks);
      const bool ok = k0 + j < k_end;
      const int64_t off = (slot[i] * token_ld + static_cast<int64_t>(kvh) * kHd) * L::kEs + part * 16;
      cp_async16(st + j * L::kRawRowB + part * 16, static_cast<const uint8_t*>(a.k_cache) + off, ok);
      cp_async16(st + L::kRawTileB + j * L::kRawRowB + part * 16, static_cast<const uint8_t*>(a.v_cache) + off, ok);
    }
    if constexpr (L::kFp8) {  // thread i < kTile: K scale of key i; else V scale of key i - kTile
      const float* src = (tid < kTile ? a.k_scales : a.v_scales) + scale_slot * a.kv_heads + kvh;
      cp_async4(st + 2 * L::kRawTileB + tid * 4, src, k0 + tid % kTile < k_end);
    }
  };

  float o[kHd / 8][4];  // O fragments: dims [8n, 8n + 8)
#pragma unroll
  for (int n = 0; n < kHd / 8; ++n) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.0f;
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};  // l: this lane's columns only
  const float s_scale = a.scale * 1.4426950408889634f;       // base-2 softmax

#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) {
    if (s < n_tiles) load_tile(s);
    cp_async_commit();
  }
  for (int tile = 0; tile < n_tiles; ++tile) {
    cp_async_wait<kStages - 2>();
    __syncthreads();  // tile `tile` has landed for every thread; every warp is done with tile - 1's stage
    if (tile + kStages - 1 < n_tiles) load_tile(tile + kStages - 1);
    cp_async_commit();
    const uint8_t* st = smem + (tile % kStages) * L::kStageB;
    const uint8_t* kt = st + warp * kKeysPerWarp * kRowB;  // this warp's 16 bf16 K rows, then V rows
    const uint8_t* vt = kt + kTile * kRowB;
    const int k0 = k_begin + tile * kTile + warp * kKeysPerWarp;  // this warp's first key
    const float* ksc = reinterpret_cast<const float*>(st + 2 * L::kRawTileB) + warp * kKeysPerWarp;  // FP8 only
    const float* vsc = ksc + kTile;
    if constexpr (L::kFp8) {
      // Codes -> bf16 rows of this warp's keys, 16 codes (one 16-byte piece) a step.
      uint8_t* dst = smem + L::kConvOff + warp * L::kWarpConvB;
      for (int i = lane; i < 2 * kKeysPerWarp * L::kChunks; i += kWarp) {
        const int kv = i / (kKeysPerWarp * L::kChunks), j = (i / L::kChunks) % kKeysPerWarp, c = i % L::kChunks;
        const uint4 w = *reinterpret_cast<const uint4*>(st + kv * L::kRawTileB +
                                                        (warp * kKeysPerWarp + j) * L::kRawRowB + c * 16);
        uint8_t* row = dst + (kv * kKeysPerWarp + j) * kRowB + c * 32;
        *reinterpret_cast<uint4*>(row) = make_uint4(fp8x2_to_bf16x2(w.x), fp8x2_to_bf16x2(w.x >> 16),
                                                    fp8x2_to_bf16x2(w.y), fp8x2_to_bf16x2(w.y >> 16));
        *reinterpret_cast<uint4*>(row + 16) = make_uint4(fp8x2_to_bf16x2(w.z), fp8x2_to_bf16x2(w.z >> 16),
                                                         fp8x2_to_bf16x2(w.w), fp8x2_to_bf16x2(w.w >> 16));
      }
      __syncwarp();
      kt = dst;
      vt = dst + kKeysPerWarp * kRowB;
    }

    // S = Q Kᵀ: s[n] holds keys k0 + 8n + 2t, +1 of rows g (0, 1) and g + 8 (2, 3).
    float s[2][4] = {};
    const uint32_t kaddr = smem_addr(kt) + (lane % 8) * kRowB + (lane / 8) * 16;
#pragma unroll
    for (int d = 0; d < kHd / 32; ++d) {  // dims [32d, 32d + 32): two k-steps
#pragma unroll
      for (int n = 0; n < 2; ++n) {
        uint32_t b[4];  // keys 8n..8n+7 at dims 32d + {0, 8, 16, 24}
        ldmatrix_x4(b, kaddr + n * 8 * kRowB + d * 64);
        mma_bf16(s[n], qf[2 * d], b[0], b[1]);
        mma_bf16(s[n], qf[2 * d + 1], b[2], b[3]);
      }
    }
    // Scale (base 2), mask the keys past the context, row max over the quad.
    float mx[2] = {-INFINITY, -INFINITY};
#pragma unroll
    for (int n = 0; n < 2; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int j = 8 * n + 2 * t + (e & 1);  // key k0 + j
        const float x = k0 + j < k_end ? s[n][e] * (L::kFp8 ? s_scale * ksc[j] : s_scale) : -INFINITY;
        s[n][e] = x;
        mx[e / 2] = fmaxf(mx[e / 2], x);
      }
    float base[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 1));
      mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 2));
      const float m_new = fmaxf(m[r], mx[r]);
      base[r] = m_new == -INFINITY ? 0.0f : m_new;  // nothing seen yet: p = 0
      const float corr = exp2f(m[r] - base[r]);
      m[r] = m_new;
      l[r] *= corr;
#pragma unroll
      for (int n = 0; n < kHd / 8; ++n) o[n][2 * r] *= corr, o[n][2 * r + 1] *= corr;
    }
    // P: fp32 into l, bf16 into the A fragment (keys [0, 16) of the warp).
    uint32_t pf[4];
#pragma unroll
    for (int n = 0; n < 2; ++n) {
      float p[4];
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        p[e] = exp2f(s[n][e] - base[e / 2]);
        l[e / 2] += p[e];
        if constexpr (L::kFp8) p[e] *= vsc[8 * n + 2 * t + (e & 1)];
      }
      pf[2 * n] = pack_bf16(p[0], p[1]);      // row g
      pf[2 * n + 1] = pack_bf16(p[2], p[3]);  // row g + 8
    }
    // O += P V.
    const uint32_t vaddr = smem_addr(vt) + ((lane % 8) + ((lane / 8) % 2) * 8) * kRowB + (lane / 16) * 16;
#pragma unroll
    for (int d = 0; d < kHd / 16; ++d) {
      uint32_t b[4];  // keys {0..7, 8..15} at dims 16d + {0..7}, then 16d + {8..15}
      ldmatrix_x4_trans(b, vaddr + d * 32);
      mma_bf16(o[2 * d], pf, b[0], b[1]);
      mma_bf16(o[2 * d + 1], pf, b[2], b[3]);
    }
  }
  cp_async_wait<0>();
  __syncthreads();  // the stages are free for the merge

  // Merge the warps: warp w's row v (v < G) as [O (128), max, sum] (base 2).
  float* rec = reinterpret_cast<float*>(smem);  // [kWarps][8][kRec]
  l[0] += __shfl_xor_sync(0xffffffffu, l[0], 1);
  l[0] += __shfl_xor_sync(0xffffffffu, l[0], 2);
  if (g < G) {
    float* mine = rec + (warp * 8 + g) * kRec;
#pragma unroll
    for (int n = 0; n < kHd / 8; ++n) *reinterpret_cast<float2*>(mine + 8 * n + 2 * t) = make_float2(o[n][0], o[n][1]);
    if (t == 0) mine[kHd] = m[0], mine[kHd + 1] = l[0];
  }
  __syncthreads();
  const int d = tid;  // this thread's output dim
  const int64_t pair = static_cast<int64_t>(blockIdx.x) * a.kv_heads + kvh;  // (sequence, kv head)
  float* out = a.out + sq.first_row * q_ld + static_cast<int64_t>(kvh) * G * kHd;
  for (int v = 0; v < G; ++v) {
    float M = -INFINITY;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) M = fmaxf(M, rec[(w * 8 + v) * kRec + kHd]);
    float Ls = 0.0f, A = 0.0f;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) {
      const float* r = rec + (w * 8 + v) * kRec;
      const float c = r[kHd] == -INFINITY ? 0.0f : exp2f(r[kHd] - M);  // a warp that saw no key weighs 0
      Ls = fmaf(r[kHd + 1], c, Ls);
      A = fmaf(r[d], c, A);
    }
    if (a.splits == 1)
      out[v * kHd + d] = A / Ls;
    else  // the record's max in natural-log units (the merge's), from base 2
      store_split_record(a.partials + (pair * a.splits + split) * kSplitRecord, v, d, M * 0.6931471805599453f, Ls, A);
  }
  if (a.splits > 1)
    merge_split_records<kDecodeMaxGroup, kThreads>(a, pair, G, out, rec + kWarps * 8 * kRec);
}

}  // namespace

template <DType KT>
cudaError_t launch_typed(const AttentionArgs& a, cudaStream_t stream) {
  constexpr size_t smem = Layout<KT>::kBytes;
  cudaError_t e = allow_dynamic_smem(attention_decode_mma_kernel<KT>, smem);
  if (e != cudaSuccess) return e;
  const dim3 grid(static_cast<unsigned>(a.num_items), static_cast<unsigned>(a.kv_heads),
                  static_cast<unsigned>(a.splits));
  return launch_pdl(attention_decode_mma_kernel<KT>, grid, kThreads, smem, stream, a);
}

bool attention_decode_mma_supports(DType dtype, int head_dim, int group) {
  return (dtype == DType::kBF16 || dtype == DType::kF8E4M3) && head_dim == kHd && group >= 1 &&
         group <= kDecodeMaxGroup;
}

cudaError_t launch_attention_decode_mma(const AttentionArgs& a, cudaStream_t stream) {
  const bool split_ok = a.splits == 1 || (a.partials && a.counters);
  if (!attention_decode_mma_supports(a.dtype, a.head_dim, a.group) || a.splits < 1 || a.splits > kMaxSplits ||
      !split_ok || a.block_size < 1 || a.kv_heads < 1)
    return cudaErrorInvalidValue;
  if (a.num_items == 0) return cudaSuccess;
  if (a.dtype == DType::kF8E4M3) {
    if (!a.k_scales || !a.v_scales) return cudaErrorInvalidValue;
    return launch_typed<DType::kF8E4M3>(a, stream);
  }
  return launch_typed<DType::kBF16>(a, stream);
}

}  // namespace m2::cuda
