// The MoE decode path (few (token, expert) pairs) for FP8 experts on tensor
// cores: the same core as the dense decode products (gemv_mma.cuh), so each
// selected expert's weights stream once from HBM with ~1.3 instructions per
// 2 weights instead of ~5 (moe.cu's SIMT decode kernels, kept for BF16
// experts and shapes not in multiples of 128).
//
//   up:   tile = (pair p, 8 rows of I); its splits are W1 and W3 (times a K
//         split): u[p, rows] = silu(Σ W1 parts) ⊙ Σ W3 parts.
//   down: tile = (token t, 8 rows of H); its splits are the token's top_k
//         experts (times a K split), each part weighed by its routing weight:
//         out[t, rows] = Σ_j w[t, j] · W2_{e_j} u[t, j], in slot order.
// A tile's splits are consecutive warps of one block (gemv_mma.cuh), so the
// sums are fixed-order and stay on chip.
#include <algorithm>

#include "backend/cuda/experts.cuh"
#include "backend/cuda/gemv_mma.cuh"
#include "backend/cuda/moe_decode_mma.h"

namespace m2::cuda {
namespace {

constexpr int kMaxRows = 32;  // staged activation rows per block (tokens of up, pairs of down)

// Stages `rows` rows (row(i)) in groups of kMmaMaxTokens.
template <class RowPtr>
__device__ void stage_rows_split(uint4* xs, float* descale, int rows, int64_t K, RowPtr row) {
  for (int r0 = 0; r0 < rows; r0 += kMmaMaxTokens)
    stage_split_rows(xs + r0 * (K / 4), descale + r0, min(kMmaMaxTokens, rows - r0), K,
                     [&](int i) { return row(r0 + i); });
}

// grid: sched.blocks, kMmaThreads; smem: the T tokens' x [T, H] as hi + lo.
template <int U>
__global__ void __launch_bounds__(kMmaThreads, 1) moe_up_mma_kernel(MoeArgs a, float* u, MmaSchedule sched) {
  extern __shared__ float4 staged[];
  uint4* xs = reinterpret_cast<uint4*>(staged);
  __shared__ float descale[kMaxRows];
  __shared__ float part[kMmaWarps][64];
  __shared__ uint4 zeros[4];
  const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp, g = lane / 4, t = lane % 4;
  const int splits = sched.splits, group = warp / splits, split = warp % splits;
  const int ks = splits / 2;  // K parts per matrix
  const int64_t H = a.experts.hidden, I = a.experts.intermediate, row_tiles = I / kMmaTileRows;
  const int64_t per = H / kMmaStepCols / ks, tiles = a.T * a.top_k * row_tiles;
  const int m = split / ks, s0 = static_cast<int>((split % ks) * per), s1 = static_cast<int>(s0 + per);
  auto matrix = [&](int64_t tile) {
    return expert_w13(a.experts, m == 0 ? a.experts.w1 : a.experts.w3, a.expert_ids[tile / row_tiles]);
  };
  auto ask_l2 = [&](int64_t tile) {
    if (tile < tiles) mma_prefetch(matrix(tile).data + (tile % row_tiles) * kMmaTileRows * H, H, kMmaTileRows, s0, s1);
  };
  if (threadIdx.x < 4) zeros[threadIdx.x] = make_uint4(0, 0, 0, 0);
  grid_dependency_wait();  // the expert ids are the router's
  allow_dependents();
  if (sched.prefetch >= 1) ask_l2(mma_tile_of(sched, 0, group));
  stage_rows_split(xs, descale, static_cast<int>(a.T), H, [&](int i) { return a.x + i * H; });
  for (int64_t r = 0;; ++r) {
    const int64_t tile = mma_tile_of(sched, r, group);
    if (tile >= tiles) break;
    if (sched.prefetch >= 2) ask_l2(mma_tile_of(sched, r + 1, group));
    const int64_t p = tile / row_tiles, n0 = (tile % row_tiles) * kMmaTileRows, tok = p / a.top_k;
    const DeviceWeight w = matrix(tile);
    float acc[4] = {0.f, 0.f, 0.f, 0.f};
    mma_tile_dot<U>(w.data + n0 * H, H, kMmaTileRows, w.scales + (n0 / kScaleBlock) * w.scale_ld, s0, s1,
                    xs + tok * (H / 4), 1, zeros, acc);
    mma_group_publish(acc, splits, part);
    if (split == 0 && g == 0) {
      const float2 gate = mma_parts_sum(part, warp, 0, ks), up = mma_parts_sum(part, warp, ks, splits);
      const float d = descale[tok];
      *reinterpret_cast<float2*>(u + p * I + n0 + 2 * t) =
          make_float2(silu_mul(gate.x * d, up.x * d), silu_mul(gate.y * d, up.y * d));
    }
    mma_group_release(splits);
  }
}

// grid: blocks, kMmaThreads; smem: the pass's T tokens' u rows [T * top_k, I]
// as hi + lo. Launched early (launch_pdl): the expert ids are the router's
// (finished before the up kernel let this one start), so each warp
// prefetches its first tile's W2 rows into L2 while the up kernel runs.
template <int U>
__global__ void __launch_bounds__(kMmaThreads, 1) moe_down_mma_kernel(MoeArgs a, const float* u, MmaSchedule sched) {
  extern __shared__ float4 staged[];
  uint4* xs = reinterpret_cast<uint4*>(staged);
  __shared__ float descale[kMaxRows];
  __shared__ float part[kMmaWarps][64];
  __shared__ uint4 zeros[4];
  const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp, g = lane / 4, t = lane % 4;
  const int splits = sched.splits, group = warp / splits, split = warp % splits;
  const int ks = splits / a.top_k;  // K parts per expert
  const int64_t H = a.experts.hidden, I = a.experts.intermediate, row_tiles = H / kMmaTileRows;
  const int64_t per = I / kMmaStepCols / ks, tiles = a.T * row_tiles;
  const int j = split / ks, s0 = static_cast<int>((split % ks) * per), s1 = static_cast<int>(s0 + per);
  auto matrix = [&](int64_t tile) { return expert_w2(a.experts, a.expert_ids[(tile / row_tiles) * a.top_k + j]); };
  auto ask_l2 = [&](int64_t tile) {
    if (tile < tiles)
      mma_prefetch(matrix(tile).data + (tile % row_tiles) * kMmaTileRows * I, I, kMmaTileRows, s0, s1);
  };
  if (sched.prefetch >= 1) ask_l2(mma_tile_of(sched, 0, group));
  if (threadIdx.x < 4) zeros[threadIdx.x] = make_uint4(0, 0, 0, 0);
  grid_dependency_wait();
  allow_dependents();
  stage_rows_split(xs, descale, static_cast<int>(a.T * a.top_k), I, [&](int i) { return u + i * I; });
  for (int64_t r = 0;; ++r) {
    const int64_t tile = mma_tile_of(sched, r, group);
    if (tile >= tiles) break;
    if (sched.prefetch >= 2) ask_l2(mma_tile_of(sched, r + 1, group));
    const int64_t tok = tile / row_tiles, n0 = (tile % row_tiles) * kMmaTileRows, p = tok * a.top_k + j;
    const DeviceWeight w = matrix(tile);
    float acc[4] = {0.f, 0.f, 0.f, 0.f};
    mma_tile_dot<U>(w.data + n0 * I, I, kMmaTileRows, w.scales + (n0 / kScaleBlock) * w.scale_ld, s0, s1,
                    xs + p * (I / 4), 1, zeros, acc);
    const float f = a.weights[p] * descale[p];
    acc[0] *= f, acc[1] *= f;
    mma_group_publish(acc, splits, part);
    if (split == 0 && g == 0) *reinterpret_cast<float2*>(a.out + tok * H + n0 + 2 * t) = mma_parts_sum(part, warp, 0, splits);
    mma_group_release(splits);
  }
}

template <int U>
cudaError_t launch_typed(const MoeArgs& a, float* u, cudaStream_t stream) {
  const DeviceExperts& x = a.experts;
  const int64_t H = x.hidden, I = x.intermediate, pairs = a.T * a.top_k;
  MmaSchedule up = choose_mma_split(pairs * (I / kMmaTileRows), H / kMmaStepCols, 2, kMmaWarps, a.num_sms);
  MmaSchedule down = choose_mma_split(a.T * (H / kMmaTileRows), I / kMmaStepCols, a.top_k, kMmaWarps, a.num_sms);
  if (!l2_prefetch_enabled()) up.prefetch = down.prefetch = 0;
  const size_t up_smem = mma_staged_bytes(a.T, H), down_smem = mma_staged_bytes(pairs, I);
  cudaError_t e = allow_dynamic_smem(moe_up_mma_kernel<U>, up_smem);
  if (e == cudaSuccess) e = allow_dynamic_smem(moe_down_mma_kernel<U>, down_smem);
  if (e == cudaSuccess)
    e = launch_pdl(moe_up_mma_kernel<U>, static_cast<unsigned>(up.blocks), kMmaThreads, up_smem, stream, a, u, up);
  if (e == cudaSuccess)
    e = launch_pdl(moe_down_mma_kernel<U>, static_cast<unsigned>(down.blocks), kMmaThreads, down_smem, stream, a,
                   static_cast<const float*>(u), down);
  return e;
}

}  // namespace

bool moe_decode_mma_fits(const MoeArgs& a) {
  const DeviceExperts& x = a.experts;
  const int64_t pairs = a.T * a.top_k;
  return mma_tuning().enabled && a.T >= mma_tuning().min_tokens && x.dtype == DType::kF8E4M3 && x.hidden % kScaleBlock == 0 &&
         x.intermediate % kScaleBlock == 0 && a.T <= kMmaMaxTokens && pairs <= kMaxRows && a.top_k <= kMmaWarps &&
         kMmaWarps % a.top_k == 0 && static_cast<size_t>(mma_staged_bytes(a.T, x.hidden)) <= kMaxDynamicSmem &&
         static_cast<size_t>(mma_staged_bytes(pairs, x.intermediate)) <= kMaxDynamicSmem &&
         reinterpret_cast<uintptr_t>(a.x) % 16 == 0 && a.num_sms > 0;
}

cudaError_t launch_moe_decode_mma(const MoeArgs& a, float* u, cudaStream_t stream) {
  return mma_tuning().u == 8 ? launch_typed<8>(a, u, stream) : launch_typed<4>(a, u, stream);
}

}  // namespace m2::cuda
