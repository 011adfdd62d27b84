// Few-token products with FP8 weights on tensor cores (decode): W [N, K]
// e4m3 with 128 x 128 block scales streamed once from HBM, fp32 activations
// [T <= 8, K], fp32 results.
//
// Why tensor cores at one token: the SIMT core (gemv.cuh) spends ~5
// instructions per 2 weights (fp8 -> f16 -> f32 conversions, then FMAs); on
// an H200 that made the q|k|v and o_proj GEMVs issue-bound at ~32 % of the
// copy rate (Nsight Compute: 0.52 issued per scheduler-cycle while active).
// Here a weight pair is one cvt (e4m3x2 -> f16x2, exact) and the products are
// mma.sync m16n8k16 (f16 in, f32 accumulate): ~1.3 instructions per 2 weights.
//
// Precision: the activations enter as f16 hi + lo (x · 2^e_t = hi + lo, e_t a
// power of two per token chosen so that max |x| · 2^e_t lies in [2^14, 2^15):
// no overflow, |x · 2^e_t - hi - lo| <= 2^-22 |x · 2^e_t| + 2^-25), so the
// product keeps ~fp32 accuracy; the weights are exact in f16; the mma sums in
// fp32. The result is multiplied by 2^-e_t (exact).
//
// Fragment mapping (PTX ISA, mma.m16n8k16 .f16): lane = 4 g + t. The weights
// are operand B (k x n = 16 columns x 8 rows): lane (g, t) holds weight row g.
// The activations are operand A (m x k = 16 tokens x 16 columns): lane (g, t)
// holds token g (tokens 8..15 are absent: a1 = a3 = 0). The dot product does
// not care which physical columns form an mma's k = 16, as long as A and B
// agree: lane (g, t) takes 16-byte chunk 4 s + t of its row at 64-column step
// s (one coalesced 64-byte segment per row), and its word j (columns
// 16 (4 s + t) + 4 j .. + 3) becomes the mma's k = {2t, 2t+1, 2t+8, 2t+9};
// the staged activations are laid out so that the same lane reads the same
// columns of its token. The result (C) holds token g x rows 2t, 2t + 1.
#pragma once

#include <cuda_fp16.h>

#include <cfloat>

#include "backend/cuda/runtime/common.cuh"
#include "backend/cuda/gemm/gemv_mma_plan.h"
#include "backend/cuda/runtime/device_types.h"

namespace m2::cuda {

constexpr int kMmaThreads = kMmaWarps * kWarp;
constexpr int kMmaMaxTokens = 8;
constexpr int kMmaTileRows = 8;   // weight rows per warp item
constexpr int kMmaStepCols = 64;  // columns per warp step (4 lanes x 16 bytes per row)

// Staged activations: per token, per 16-column chunk c, 16 u32 (64 bytes):
// words 0..7 the f16x2 hi values of columns 16 c + 2 i, 2 i + 1, words 8..15
// the lo values. uint4 row stride: K / 4.
__host__ __device__ constexpr int64_t mma_staged_bytes(int64_t T, int64_t K) { return T * K * 4; }

// d += A (16 x 16 f16) · B (16 x 8 f16), fp32; A's rows 8..15 are zero.
__device__ inline void mma_f16_rows8(float (&d)[4], uint32_t a0, uint32_t a2, uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a0), "r"(0u), "r"(a2), "r"(0u), "r"(b0), "r"(b1));
}

// e with amax · 2^e in [2^14, 2^15), the power of two that puts a row whose
// largest magnitude is amax into f16 hi + lo (above); zero, inf or NaN: 0.
__device__ inline int f16_split_exponent(float amax) {
  return amax > 0.0f && amax <= FLT_MAX ? min(max(14 - ilogbf(amax), -126), 126) : 0;
}

// hi + lo of the pair x (already scaled by 2^e): hi = f16(x), lo = f16(x - hi)
// (x - hi is exact in fp32), each pair as f16x2 (x.x in the low half).
__device__ inline void f16_split(float2 x, uint32_t& hi, uint32_t& lo) {
  const __half2 h = __float22half2_rn(x);
  const float2 f = __half22float2(h);
  const __half2 l = __float22half2_rn(make_float2(x.x - f.x, x.y - f.y));
  hi = *reinterpret_cast<const uint32_t*>(&h);
  lo = *reinterpret_cast<const uint32_t*>(&l);
}

// Stages T <= kMmaMaxTokens rows of K fp32 (row t at row(t), 16-byte
// aligned, K % 16 == 0) as hi + lo (layout above) and descale[t] = 2^-e_t.
// All threads of the block; ends with __syncthreads().
template <class RowPtr>
__device__ void stage_split_rows(uint4* xs, float* descale, int T, int64_t K, RowPtr row) {
  __shared__ float max_of_warp[kMmaWarps];
  const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
  const int per_token = kMmaWarps / T;  // warps per token (T <= 8: at least 2)
  const int tok = warp / per_token, part = warp % per_token;
  const int64_t n4 = K / 4;
  constexpr int kBatch = 8;
  // The warp's float4 i = base + b * per_token * 32 of its token's row, b < kBatch, all loads issued first.
  auto load_batch = [&](int64_t base, float4 (&v)[kBatch]) {
    const float4* src = reinterpret_cast<const float4*>(row(tok));
#pragma unroll
    for (int b = 0; b < kBatch; ++b) {
      const int64_t i = base + static_cast<int64_t>(b) * per_token * kWarp;
      v[b] = i < n4 ? src[i] : make_float4(0.f, 0.f, 0.f, 0.f);
    }
  };
  // 1. max |x| of each token. A row that one batch covers (decode sizes)
  // stays in registers for step 2: one round trip, not two.
  const bool one_batch = n4 <= static_cast<int64_t>(kBatch) * per_token * kWarp;
  float4 v[kBatch];
  float m = 0.0f;
  if (tok < T) {
    for (int64_t base = part * kWarp + lane; base < n4; base += kBatch * per_token * kWarp) {
      load_batch(base, v);
#pragma unroll
      for (int b = 0; b < kBatch; ++b) m = fmaxf(m, fmaxf(fmaxf(fabsf(v[b].x), fabsf(v[b].y)), fmaxf(fabsf(v[b].z), fabsf(v[b].w))));
    }
  }
  m = warp_max(m);
  if (lane == 0) max_of_warp[warp] = m;
  __syncthreads();
  if (tok >= T) {
    __syncthreads();
    return;
  }
  float tm = 0.0f;
  for (int p = 0; p < per_token; ++p) tm = fmaxf(tm, max_of_warp[tok * per_token + p]);
  const int e = f16_split_exponent(tm);
  const float up = ldexpf(1.0f, e);
  if (part == 0 && lane == 0) descale[tok] = ldexpf(1.0f, -e);
  // 2. hi + lo of x · 2^e (float4 i -> chunk i / 4, words 2 (i % 4), + 1).
  uint32_t* dst = reinterpret_cast<uint32_t*>(xs) + static_cast<int64_t>(tok) * K;
  for (int64_t base = part * kWarp + lane; base < n4; base += kBatch * per_token * kWarp) {
    if (!one_batch) load_batch(base, v);
#pragma unroll
    for (int b = 0; b < kBatch; ++b) {
      const int64_t i = base + static_cast<int64_t>(b) * per_token * kWarp;
      if (i >= n4) break;
      uint32_t h01, l01, h23, l23;
      f16_split(make_float2(v[b].x * up, v[b].y * up), h01, l01);
      f16_split(make_float2(v[b].z * up, v[b].w * up), h23, l23);
      uint32_t* c = dst + (i / 4) * 16 + 2 * (i % 4);
      *reinterpret_cast<uint2*>(c) = make_uint2(h01, h23);
      *reinterpret_cast<uint2*>(c + 8) = make_uint2(l01, l23);
    }
  }
  __syncthreads();
}

// Two e4m3 pairs of a 32-bit word as f16x2 (exact): columns 0, 1 and 2, 3.
__device__ inline void e4m3x4_to_f16x2x2(uint32_t word, uint32_t& b0, uint32_t& b1) {
  asm("{\n .reg .b16 lo, hi;\n mov.b32 {lo, hi}, %2;\n cvt.rn.f16x2.e4m3x2 %0, lo;\n cvt.rn.f16x2.e4m3x2 %1, hi;\n}\n"
      : "=r"(b0), "=r"(b1)
      : "r"(word));
}

// One warp's product of one 8-row tile over 64-column steps [s0, s1) (both
// even: a pair of steps is one 128-column scale block), loads in groups of U
// steps, two groups in flight (~4 KB per warp). mma_tile_begin issues the
// first two groups: the weights are never written by a kernel, so a kernel
// launched early (launch_pdl) calls it before grid_dependency_wait() and
// their latency overlaps the wait and the staging of the activations.
constexpr int kMmaGroupSteps = 4;  // U
struct MmaGroup {
  uint4 w[kMmaGroupSteps];
  float sc[kMmaGroupSteps / 2];
};
struct MmaTile {
  const uint8_t* wp = nullptr;  // this lane's chunk of its row at step 0
  const float* sc = nullptr;    // the tile's scale row (one fp32 per 128 columns)
  bool row_ok = false;
  int s0 = 0, s1 = 0;
  MmaGroup a, b;
};

__device__ inline void mma_issue(const MmaTile& m, MmaGroup& G, int s) {
  constexpr int U = kMmaGroupSteps;
#pragma unroll
  for (int u = 0; u < U; ++u)
    G.w[u] = m.row_ok && s + u < m.s1 ? load_stream(m.wp + static_cast<int64_t>(s + u) * kMmaStepCols) : make_uint4(0, 0, 0, 0);
#pragma unroll
  for (int p = 0; p < U / 2; ++p) G.sc[p] = s + 2 * p < m.s1 ? __ldg(m.sc + (s + 2 * p) / 2) : 0.0f;
}

// w: the tile's first row (row stride K bytes), `rows` of its 8 rows exist.
__device__ inline void mma_tile_begin(MmaTile& m, const uint8_t* w, int64_t K, int rows, const float* sc, int s0,
                                      int s1) {
  const int lane = threadIdx.x % kWarp, g = lane / 4, t = lane % 4;
  m.wp = w + g * K + t * 16, m.sc = sc, m.row_ok = g < rows, m.s0 = s0, m.s1 = s1;
  mma_issue(m, m.a, s0);
  if (s0 + kMmaGroupSteps < s1) mma_issue(m, m.b, s0 + kMmaGroupSteps);
}

// acc (C fragment: token g x weight rows 2t, 2t + 1 of the tile) += the
// tile's product, m begun by mma_tile_begin. xs: staged activations of token
// 0 (token g at xs + g * K / 4), T tokens; zeros: 4 zero uint4 in shared
// memory, read by the lanes of absent tokens (no per-step select).
__device__ inline void mma_tile_dot(MmaTile& m, int64_t K, const uint4* xs, int T, const uint4* zeros,
                                    float (&acc)[4]) {
  const int lane = threadIdx.x % kWarp, g = lane / 4, t = lane % 4;
  const bool tok_ok = g < T;
  const uint4* xp = tok_ok ? xs + g * (K / 4) + t * 4 : zeros;  // chunk 4 s + t of token g: xp + xstep * s
  const int xstep = tok_ok ? 16 : 0;
  constexpr int U = kMmaGroupSteps;
  auto use = [&](const MmaGroup& G, int s) {
#pragma unroll
    for (int p = 0; p < U / 2; ++p) {
      if (s + 2 * p >= m.s1) continue;
      float ch[4] = {0.f, 0.f, 0.f, 0.f}, cl[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const uint4* x = xp + (s + 2 * p + h) * xstep;
        const uint4 x0 = x[0], x1 = x[1], x2 = x[2], x3 = x[3];
        const uint4 wv = G.w[2 * p + h];
        const uint32_t words[4] = {wv.x, wv.y, wv.z, wv.w};
        const uint32_t hi[8] = {x0.x, x0.y, x0.z, x0.w, x1.x, x1.y, x1.z, x1.w};
        const uint32_t lo[8] = {x2.x, x2.y, x2.z, x2.w, x3.x, x3.y, x3.z, x3.w};
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          uint32_t b0, b1;
          e4m3x4_to_f16x2x2(words[j], b0, b1);
          mma_f16_rows8(ch, hi[2 * j], hi[2 * j + 1], b0, b1);
          mma_f16_rows8(cl, lo[2 * j], lo[2 * j + 1], b0, b1);
        }
      }
      acc[0] = fmaf(ch[0] + cl[0], G.sc[p], acc[0]);
      acc[1] = fmaf(ch[1] + cl[1], G.sc[p], acc[1]);
    }
  };
  // Group a holds steps [s, s + U), b [s + U, s + 2U); each is refilled with
  // the steps 2U further as soon as it has been used.
  for (int s = m.s0; s < m.s1; s += 2 * U) {
    use(m.a, s);
    if (s + 2 * U < m.s1) mma_issue(m, m.a, s + 2 * U);
    if (s + U >= m.s1) break;
    use(m.b, s + U);
    if (s + 3 * U < m.s1) mma_issue(m, m.b, s + 3 * U);
  }
}

// Round r of group q of this block (MmaSchedule).
__device__ inline int64_t mma_tile_of(int splits, int64_t round, int group) {
  return (round * (kMmaWarps / splits) + group) * gridDim.x + blockIdx.x;
}

// Split sums of a group of warps, through shared memory part[warp][64]
// (token g x row 2t + r of the tile at [8 g + 2 t + r]), in split order
// (deterministic). Every warp of the group: mma_group_publish; then any of
// them reads sums with mma_parts_sum; then all: mma_group_release (before
// part is written again). Named barrier 1 + group per group.
__device__ inline void mma_group_barrier(int splits) {
  asm volatile("bar.sync %0, %1;" ::"r"(1 + static_cast<int>(threadIdx.x / kWarp) / splits), "r"(splits * kWarp)
               : "memory");
}
__device__ inline void mma_group_publish(const float (&acc)[4], int splits, float (*part)[64]) {
  const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
  *reinterpret_cast<float2*>(&part[warp][8 * (lane / 4) + 2 * (lane % 4)]) = make_float2(acc[0], acc[1]);
  mma_group_barrier(splits);
}
// Σ_{i in [from, to)} part[first + i] for this lane's two values.
__device__ inline float2 mma_parts_sum(const float (*part)[64], int first, int from, int to) {
  const int lane = threadIdx.x % kWarp, at = 8 * (lane / 4) + 2 * (lane % 4);
  float2 s = make_float2(0.f, 0.f);
  for (int i = from; i < to; ++i) {
    const float2 p = *reinterpret_cast<const float2*>(&part[first + i][at]);
    s.x += p.x, s.y += p.y;
  }
  return s;
}
__device__ inline void mma_group_release(int splits) { mma_group_barrier(splits); }

}  // namespace m2::cuda
