// Causal GQA prefill attention on tensor cores (FlashAttention-2 style) over
// the paged KV cache, head_dim 128, BF16 or FP8 (e4m3 + per-token scale)
// caches.
//
// Block = (work item, kv head): 128 (row, q head) vectors of one sequence that
// share the kv head (v = row * group + head in group; 21.3 rows of M2's 6
// heads), so one K/V tile in shared memory serves the whole GQA group. Each of
// the 4 warps owns 32 vectors, two row tiles of mma.m16n8k16, so that every K
// and V fragment it reads from shared memory serves both (FlashAttention-2's
// 4 x 32 split: 160 KB of ldmatrix reads per 64-key tile against 256 KB with
// 8 warps of 16; 8K prefill 408-410 against 387-400 TFLOP/s on the H200, at
// 255 registers and 2 blocks an SM). The block walks the keys [0, position of
// its last row] in tiles of 64, double-buffered: the tile after next is
// gathered through the block table with cp.async while the warps compute on
// the current one. Per tile and warp:
//   S = Q Kᵀ  (bf16 operands, fp32 accumulation; Q converted once to bf16 in
//              shared memory, its fragments and K's by ldmatrix),
//   S *= softmax scale · log2 e (· the key's K scale for FP8), causal mask,
//   online softmax in base 2 in fp32 (row max over a quad of lanes),
//   O += P V  (P from the S accumulators as bf16 A fragments, times the
//              key's V scale for FP8; V fragments by ldmatrix.trans).
// Tiles past a warp's last position are skipped; the mask is applied only to
// tiles reaching past its first. A row's result depends on its own query and
// keys only (per-row softmax state; tiles past its position, computed for a
// later row of its warp, add exact zeros), so any row count per sequence,
// decode rows included, gives a row the same bits: the batch-invariant mode
// runs every row here (attention_plan.h).
//
// FP8 codes are converted to bf16 in shared memory after they land (exact:
// e4m3 -> f16 -> bf16 loses nothing) and the scales stay in fp32 on S and P,
// so FP8 costs no more rounding than BF16. Rounding: Q and P to bf16
// (relative 2^-9 each); everything else fp32.
//
// With a.out8.q the epilogue also writes out's FP8 copy: a vector's 128
// outputs (one head of one row) are exactly one 128-channel quantisation
// group, held by the 4 lanes of a quad, so its amax is a quad reduction and
// each lane codes the fp32 values it stores (fp8_quant.cuh's rule).
//
// Shared memory rows of bf16 Q, K and V are 256 + 16 bytes: the 8 row
// addresses of an ldmatrix (8 consecutive rows, same dims) then fall in
// distinct banks.
#include <cmath>

#include "backend/cuda/attention/attention.h"
#include "backend/cuda/attention/attention_prefill.h"
#include "backend/cuda/gemm/bf16_mma.cuh"
#include "backend/cuda/gemm/fp8_quant.cuh"
#include "backend/cuda/runtime/async_copy.cuh"
#include "backend/cuda/runtime/common.cuh"

namespace m2::cuda {
namespace {

constexpr int kHd = 128;  // head_dim
constexpr int kWarps = 4;
constexpr int kMT = 2;  // m16 row tiles per warp: each K and V fragment serves 32 vectors
constexpr int kThreads = kWarps * kWarp;
constexpr int kBM = kPrefillVectors;  // vectors per block
constexpr int kBN = 64;               // keys per tile
constexpr int kRowB = kHd * 2 + 16;   // bytes of a bf16 K or V row in shared memory
constexpr int kTileB = kBN * kRowB;   // bytes of a bf16 K (or V) tile
constexpr float kLog2e = 1.4426950408889634f;
static_assert(kBM == kWarps * 16 * kMT, "a warp owns 32 vectors");

// Shared memory of one block: raw[2 buffers][K, V] tiles as stored (cp.async
// destinations), then for FP8 the bf16 K, V tiles the warps read and the
// scales[2 buffers][K, V][kBN].
template <DType KT>
struct Smem {
  static constexpr bool kFp8 = KT == DType::kF8E4M3;
  static constexpr int kEsize = kFp8 ? 1 : 2;
  static constexpr int kChunks = kHd * kEsize / 16;        // 16-byte chunks per key row (one head)
  static constexpr int kRawRowB = kFp8 ? kHd : kRowB;      // FP8 rows are only read row-wise, unpadded
  static constexpr int kRawTileB = kBN * kRawRowB;
  static constexpr int kBf16Off = 2 * 2 * kRawTileB;
  static constexpr int kScaleOff = kBf16Off + (kFp8 ? 2 * kTileB : 0);
  static constexpr int kQOff = kScaleOff + (kFp8 ? 2 * 2 * kBN * 4 : 0);  // Q [kBM][kRowB] bf16
  static constexpr int kBytes = kQOff + kBM * kRowB;
};

template <DType KT>
__global__ void __launch_bounds__(kThreads, 2) attention_prefill_kernel(AttentionArgs a) {
  using S = Smem<KT>;
  extern __shared__ __align__(16) uint8_t smem[];
  const int kvh = static_cast<int>(blockIdx.x % a.kv_heads);
  const AttnItem item = a.items[blockIdx.x / a.kv_heads];
  const AttnSeq sq = a.seqs[item.seq];
  const int G = a.group;
  const int n_vec = min(kBM, sq.num_rows * G - item.first_vector);  // valid vectors of this block
  const int first_pos = sq.context_len - sq.num_rows;               // position of the sequence's row 0
  const int n_keys = first_pos + (item.first_vector + n_vec - 1) / G + 1;
  const int n_tiles = (n_keys + kBN - 1) / kBN;
  const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
  const int g = lane / 4, t = lane % 4;
  const int64_t q_ld = static_cast<int64_t>(a.kv_heads) * G * kHd;
  auto pos_of = [&](int vl) { return first_pos + (item.first_vector + min(vl, n_vec - 1)) / G; };

  // This lane's rows of the warp's 32 vectors: of row tile mt, r = 0 is
  // vector 32 warp + 16 mt + g, r = 1 is 8 further. Padding vectors (past
  // n_vec) act as the last valid one (finite, in range) and are not written.
  bool valid[kMT][2];
  int pos[kMT][2];
  int64_t row[kMT][2];  // of the step
  int head[kMT][2];     // q head
#pragma unroll
  for (int mt = 0; mt < kMT; ++mt)
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const int vl = warp * 32 + 16 * mt + g + 8 * r;
      const int v = item.first_vector + min(vl, n_vec - 1);
      valid[mt][r] = vl < n_vec;
      pos[mt][r] = first_pos + v / G;
      row[mt][r] = sq.first_row + v / G;
      head[mt][r] = kvh * G + v % G;
    }
  auto off = [&](int mt, int r) { return row[mt][r] * q_ld + static_cast<int64_t>(head[mt][r]) * kHd; };
  const int warp_min_pos = pos_of(warp * 32), warp_max_pos = pos_of(warp * 32 + 31);
  // Warps whose vectors are all padding (a short item: a decode row's 6
  // vectors, under batch invariance) load tiles but compute nothing.
  const bool active = warp * 32 < n_vec;

  // Q of the block's vectors, bf16, to shared memory (rows of kRowB bytes:
  // the 8 rows of an ldmatrix fall in distinct banks); padding vectors zero.
  // Vector vl's row is written by the 4 lanes of its quad, 32 dims each.
  uint8_t* qs = smem + S::kQOff;
#pragma unroll
  for (int mt = 0; mt < kMT; ++mt)
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const int vl = warp * 32 + 16 * mt + g + 8 * r;
#pragma unroll
      for (int i = 0; i < kHd / 32; ++i) {  // 8 dims a step: 32 t + 8 i .. + 8
        const int d0 = 32 * t + 8 * i;
        float4 x0 = make_float4(0.f, 0.f, 0.f, 0.f), x1 = x0;
        if (valid[mt][r]) {
          x0 = *reinterpret_cast<const float4*>(a.q + off(mt, r) + d0);
          x1 = *reinterpret_cast<const float4*>(a.q + off(mt, r) + d0 + 4);
        }
        *reinterpret_cast<uint4*>(qs + vl * kRowB + d0 * 2) =
            make_uint4(pack_bf16(x0.x, x0.y), pack_bf16(x0.z, x0.w), pack_bf16(x1.x, x1.y), pack_bf16(x1.z, x1.w));
      }
    }
  // ldmatrix address of this lane for the A fragment of row tile mt at dims
  // [16c, 16c + 16): lane l gives row (l % 8) + 8 ((l / 8) % 2), dims + 8 (l / 16).
  const uint32_t qaddr = smem_addr(qs) + (warp * 32 + (lane % 8) + ((lane / 8) % 2) * 8) * kRowB + (lane / 16) * 16;

  // Gathers key tile `tile` into raw buffer `buf` (cp.async; keys past
  // n_keys read as zeros with scale 0, finite for the masked P V).
  const PagedSlots slot_of(a.block_tables + sq.table_offset, a.block_size);
  const uint8_t* kc = static_cast<const uint8_t*>(a.k_cache);
  const uint8_t* vc = static_cast<const uint8_t*>(a.v_cache);
  float* scales = reinterpret_cast<float*>(smem + S::kScaleOff);
  auto load_tile = [&](int tile, int buf) {
    uint8_t* kraw = smem + buf * 2 * S::kRawTileB;
    uint8_t* vraw = kraw + S::kRawTileB;
    constexpr int kKeysPerPass = kThreads / S::kChunks;  // 16 (BF16) or 32 (FP8)
    const int c = threadIdx.x % S::kChunks;
#pragma unroll
    for (int p = 0; p < kBN / kKeysPerPass; ++p) {
      const int j = static_cast<int>(threadIdx.x) / S::kChunks + p * kKeysPerPass;
      const int key = tile * kBN + j;
      const bool ok = key < n_keys;
      const int64_t src = ((ok ? slot_of(key) : 0) * a.kv_heads + kvh) * (kHd * S::kEsize) + c * 16;
      cp_async16(kraw + j * S::kRawRowB + c * 16, kc + src, ok);
      cp_async16(vraw + j * S::kRawRowB + c * 16, vc + src, ok);
    }
    if constexpr (S::kFp8) {
      if (threadIdx.x < 2 * kBN) {  // threads [0, 64): K scales, [64, 128): V scales
        const int j = threadIdx.x % kBN;
        const int key = tile * kBN + j;
        const bool ok = key < n_keys;
        const float* src = (threadIdx.x < kBN ? a.k_scales : a.v_scales) + (ok ? slot_of(key) : 0) * a.kv_heads + kvh;
        cp_async4(scales + buf * 2 * kBN + threadIdx.x, src, ok);
      }
    }
  };

  float o[kMT][kHd / 8][4];  // O fragments: dims [8n, 8n + 8)
#pragma unroll
  for (int mt = 0; mt < kMT; ++mt)
#pragma unroll
    for (int n = 0; n < kHd / 8; ++n) o[mt][n][0] = o[mt][n][1] = o[mt][n][2] = o[mt][n][3] = 0.0f;
  float m[kMT][2], l[kMT][2];  // l: this lane's columns only
#pragma unroll
  for (int mt = 0; mt < kMT; ++mt) m[mt][0] = m[mt][1] = -INFINITY, l[mt][0] = l[mt][1] = 0.0f;
  const float s_scale = a.scale * kLog2e;

  load_tile(0, 0);
  cp_async_commit();
  for (int tile = 0; tile < n_tiles; ++tile) {
    const int buf = tile & 1;
    if (tile + 1 < n_tiles) {
      load_tile(tile + 1, buf ^ 1);
      cp_async_commit();
      cp_async_wait<1>();
    } else {
      cp_async_wait<0>();
    }
    __syncthreads();  // every thread's part of tile `tile` has landed
    const uint8_t* kt = smem + buf * 2 * S::kRawTileB;
    const uint8_t* vt = kt + S::kRawTileB;
    const float* ksc = scales + buf * 2 * kBN;  // FP8 only
    const float* vsc = ksc + kBN;
    if constexpr (S::kFp8) {
      // Codes -> bf16 tiles: 16 codes (one 16-byte piece) per step.
      uint8_t* dst = smem + S::kBf16Off;
      for (int i = threadIdx.x; i < 2 * kBN * S::kChunks; i += kThreads) {
        const int kv = i / (kBN * S::kChunks), j = (i / S::kChunks) % kBN, c = i % S::kChunks;
        const uint4 w = *reinterpret_cast<const uint4*>(kt + kv * S::kRawTileB + j * S::kRawRowB + c * 16);
        const uint4 lo = make_uint4(fp8x2_to_bf16x2(w.x), fp8x2_to_bf16x2(w.x >> 16), fp8x2_to_bf16x2(w.y),
                                    fp8x2_to_bf16x2(w.y >> 16));
        const uint4 hi = make_uint4(fp8x2_to_bf16x2(w.z), fp8x2_to_bf16x2(w.z >> 16), fp8x2_to_bf16x2(w.w),
                                    fp8x2_to_bf16x2(w.w >> 16));
        uint8_t* row = dst + kv * kTileB + j * kRowB + c * 32;
        *reinterpret_cast<uint4*>(row) = lo;
        *reinterpret_cast<uint4*>(row + 16) = hi;
      }
      __syncthreads();
      kt = dst;
      vt = dst + kTileB;
    }
    const int k0 = tile * kBN;
    if (active && k0 <= warp_max_pos) {  // warp-uniform: some key of the tile is visible to one of its rows
      // S = Q Kᵀ: s[mt][n] holds keys k0 + 8n + 2t, +1 of rows g (0, 1) and g + 8 (2, 3) of row tile mt.
      float s[kMT][kBN / 8][4];
#pragma unroll
      for (int mt = 0; mt < kMT; ++mt)
#pragma unroll
        for (int n = 0; n < kBN / 8; ++n) s[mt][n][0] = s[mt][n][1] = s[mt][n][2] = s[mt][n][3] = 0.0f;
      const uint32_t kaddr = smem_addr(kt) + (lane % 8) * kRowB + (lane / 8) * 16;
#pragma unroll
      for (int d = 0; d < kHd / 32; ++d) {  // dims [32d, 32d + 32): two k-steps
        uint32_t qa[kMT][2][4];  // Q fragments of the two k-steps
#pragma unroll
        for (int mt = 0; mt < kMT; ++mt)
#pragma unroll
          for (int h = 0; h < 2; ++h) ldmatrix_x4(qa[mt][h], qaddr + mt * 16 * kRowB + (2 * d + h) * 32);
#pragma unroll
        for (int n = 0; n < kBN / 8; ++n) {
          uint32_t b[4];  // keys 8n..8n+7 at dims 32d + {0, 8, 16, 24}
          ldmatrix_x4(b, kaddr + n * 8 * kRowB + d * 64);
#pragma unroll
          for (int mt = 0; mt < kMT; ++mt) {
            mma_bf16(s[mt][n], qa[mt][0], b[0], b[1]);
            mma_bf16(s[mt][n], qa[mt][1], b[2], b[3]);
          }
        }
      }
      // Scale (base 2), mask, row max over the quad that shares the rows.
      const bool masked = k0 + kBN - 1 > warp_min_pos;
      uint32_t pf[kMT][kBN / 16][4];  // P as bf16 A fragments, keys [16c, 16c + 16)
#pragma unroll
      for (int mt = 0; mt < kMT; ++mt) {
        float mx[2] = {-INFINITY, -INFINITY};
#pragma unroll
        for (int n = 0; n < kBN / 8; ++n) {
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            const int j = 8 * n + 2 * t + (e & 1);  // key k0 + j
            float x = s[mt][n][e] * (S::kFp8 ? s_scale * ksc[j] : s_scale);
            if (masked && k0 + j > pos[mt][e / 2]) x = -INFINITY;
            s[mt][n][e] = x;
            mx[e / 2] = fmaxf(mx[e / 2], x);
          }
        }
        float corr[2], base[2];
#pragma unroll
        for (int r = 0; r < 2; ++r) {
          mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 1));
          mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 2));
          const float m_new = fmaxf(m[mt][r], mx[r]);
          base[r] = m_new == -INFINITY ? 0.0f : m_new;  // a row with nothing visible yet keeps p = 0
          corr[r] = exp2f(m[mt][r] - base[r]);
          m[mt][r] = m_new;
          l[mt][r] *= corr[r];
        }
#pragma unroll
        for (int n = 0; n < kHd / 8; ++n)
          o[mt][n][0] *= corr[0], o[mt][n][1] *= corr[0], o[mt][n][2] *= corr[1], o[mt][n][3] *= corr[1];
        // P (fp32 sum into l; bf16, times the V scale, into the A fragments).
#pragma unroll
        for (int n = 0; n < kBN / 8; ++n) {
          float p[4];
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            p[e] = exp2f(s[mt][n][e] - base[e / 2]);
            l[mt][e / 2] += p[e];
            if constexpr (S::kFp8) p[e] *= vsc[8 * n + 2 * t + (e & 1)];
          }
          pf[mt][n / 2][2 * (n % 2)] = pack_bf16(p[0], p[1]);      // row g
          pf[mt][n / 2][2 * (n % 2) + 1] = pack_bf16(p[2], p[3]);  // row g + 8
        }
      }
      // O += P V.
      const uint32_t vaddr = smem_addr(vt) + ((lane % 8) + ((lane / 8) % 2) * 8) * kRowB + (lane / 16) * 16;
#pragma unroll
      for (int c = 0; c < kBN / 16; ++c) {
#pragma unroll
        for (int d = 0; d < kHd / 16; ++d) {
          uint32_t b[4];  // keys 16c + {0..7, 8..15} at dims 16d + {0..7}, then 16d + {8..15}
          ldmatrix_x4_trans(b, vaddr + c * 16 * kRowB + d * 32);
#pragma unroll
          for (int mt = 0; mt < kMT; ++mt) {
            mma_bf16(o[mt][2 * d], pf[mt][c], b[0], b[1]);
            mma_bf16(o[mt][2 * d + 1], pf[mt][c], b[2], b[3]);
          }
        }
      }
    }
    __syncthreads();  // the buffers of this tile may be refilled
  }

  const bool fp8_out = a.out8.q != nullptr;
#pragma unroll
  for (int mt = 0; mt < kMT; ++mt)
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      l[mt][r] += __shfl_xor_sync(0xffffffffu, l[mt][r], 1);
      l[mt][r] += __shfl_xor_sync(0xffffffffu, l[mt][r], 2);
      const float inv = 1.0f / l[mt][r];  // padding vectors too (finite): every lane takes part in the shuffles
      float amax = 0.0f;
#pragma unroll
      for (int n = 0; n < kHd / 8; ++n) {
        o[mt][n][2 * r] *= inv, o[mt][n][2 * r + 1] *= inv;
        amax = fmaxf(amax, fmaxf(fabsf(o[mt][n][2 * r]), fabsf(o[mt][n][2 * r + 1])));
      }
      if (fp8_out) {  // the head's amax over the quad (fmaxf: exact in any order)
        amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, 1));
        amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, 2));
      }
      if (!valid[mt][r]) continue;
      const int64_t at = off(mt, r) + 2 * t;
#pragma unroll
      for (int n = 0; n < kHd / 8; ++n)
        *reinterpret_cast<float2*>(a.out + at + 8 * n) = make_float2(o[mt][n][2 * r], o[mt][n][2 * r + 1]);
      if (!fp8_out) continue;
      const float scale = fp8_group_scale(amax);
#pragma unroll
      for (int n = 0; n < kHd / 8; ++n)
        *reinterpret_cast<uint16_t*>(a.out8.q + at + 8 * n) =
            static_cast<uint16_t>(fp8_code(o[mt][n][2 * r], scale) | fp8_code(o[mt][n][2 * r + 1], scale) << 8);
      if (t == 0) a.out8.s[head[mt][r] * a.T + row[mt][r]] = scale;
    }
}

template <DType KT>
cudaError_t launch_typed(const AttentionArgs& a, cudaStream_t stream) {
  constexpr size_t smem = Smem<KT>::kBytes;
  cudaError_t e = allow_dynamic_smem(attention_prefill_kernel<KT>, smem);
  if (e != cudaSuccess) return e;
  const int64_t blocks = a.num_items * a.kv_heads;
  if (blocks > 0x7fffffff) return cudaErrorInvalidValue;
  attention_prefill_kernel<KT><<<static_cast<unsigned>(blocks), kThreads, smem, stream>>>(a);
  return cudaGetLastError();
}

}  // namespace

bool attention_prefill_supports(DType dtype, int head_dim) {
  return head_dim == kHd && (dtype == DType::kBF16 || dtype == DType::kF8E4M3);
}

cudaError_t launch_attention_prefill(const AttentionArgs& a, cudaStream_t stream) {
  if (!attention_prefill_supports(a.dtype, a.head_dim) || a.group < 1 || a.kv_heads < 1 || a.num_items < 1 ||
      a.block_size < 1 || (a.out8.q && !a.out8.s))
    return cudaErrorInvalidValue;
  if (a.dtype == DType::kF8E4M3) {
    if (!a.k_scales || !a.v_scales) return cudaErrorInvalidValue;
    return launch_typed<DType::kF8E4M3>(a, stream);
  }
  return launch_typed<DType::kBF16>(a, stream);
}

}  // namespace m2::cuda
