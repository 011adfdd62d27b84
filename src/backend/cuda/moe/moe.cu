// The SwiGLU experts of one MoE layer: out[t] = Σ_j w[t, j] · W2_e(silu(W1_e x_t) ⊙ W3_e x_t)
// over each token's top-k experts e = ids[t, j], expert weights in their
// stored dtype (FP8 e4m3 + 128 x 128 scales, or BF16), decoded in registers.
//
// Decode (at most kMoeDecodePairs (token, expert) pairs): no grouping at all
// (moe_decode.cu).
//   up:   one block column per pair streams W1_e and W3_e rows, SwiGLU in the
//         epilogue -> u [pairs, I];
//   down: one block column per token streams W2 of its k experts and sums
//         the routing-weighted results in registers -> out [T, H]; FP8
//         experts on sm_90: 64-row tiles of each pair's W2 on tensor cores
//         (moe_decode_wgmma.cu), same accuracy.
//   Each selected expert's weights are read once per token, at memory speed.
// More pairs (prefill, large batches): pairs are grouped by expert on the GPU
// (no host round trip), tiles of up to 4 pairs of one expert share each pass
// over its weights, and a last kernel combines the k results of each token
// in slot order. FP8 experts with dimensions in multiples of 128 use tiles
// of 64 pairs on tensor cores instead (moe_fp8.cu), or, with MoeArgs::use_cutlass,
// CUTLASS's grouped GEMMs with one group per expert (moe_cutlass.cu).
#include <algorithm>

#include "backend/cuda/gemm/fp8_gemm.h"
#include "backend/cuda/gemm/gemv.cuh"
#include "backend/cuda/moe/experts.cuh"
#include "backend/cuda/moe/moe.h"
#include "backend/cuda/moe/moe_cutlass.h"
#include "backend/cuda/moe/moe_decode.h"
#include "backend/cuda/moe/moe_group.h"
#include "backend/cuda/runtime/device_buffer.h"

namespace m2::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / kWarp;
constexpr int kTileTokens = 4;  // pairs per tile in the grouped path

// ---- grouped path -------------------------------------------------------------

// u[pair(t)] = silu(W1_e x) ⊙ W3_e x for the block's rows of I, for the
// TM activation rows staged in xs (pair(t) gives each one's output row).
template <DType WT, int TM, int R, class PairOf>
__device__ void up_rows(const MoeArgs& a, int64_t e, const float4* xs, const XLayout& lay, int T, float* u,
                        PairOf pair_of) {
  const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
  const int64_t I = a.experts.intermediate;
  const int64_t n = static_cast<int64_t>(blockIdx.y) * kWarps * R + warp * R;
  float acc[2][R][TM] = {};  // W1 (gate), W3 (up): streamed in one pass
  const DeviceWeight w13[2] = {expert_w13(a.experts, a.experts.w1, e), expert_w13(a.experts, a.experts.w3, e)};
  dot_rows_n<WT, TM, R, 2>(w13, n, xs, lay, lane, T, acc);
#pragma unroll
  for (int r = 0; r < R; ++r)
#pragma unroll
    for (int t = 0; t < TM; ++t) {
      const float gs = warp_sum(acc[0][r][t]), us = warp_sum(acc[1][r][t]);
      if (lane == r * TM + t && t < T && n + r < I) u[pair_of(t) * I + n + r] = silu_mul(gs, us);
    }
}

// grid (max tiles, I / (kWarps * 4)).
template <DType WT>
__global__ void __launch_bounds__(kThreads) moe_up_grouped_kernel(MoeArgs a, const int32_t* sorted, const int4* tiles,
                                                                  const int* num_tiles, float* u) {
  extern __shared__ float4 xs[];
  if (static_cast<int>(blockIdx.x) >= *num_tiles) return;
  const int4 tile = tiles[blockIdx.x];
  const int64_t H = a.experts.hidden;
  const XLayout lay = make_layout<WT>(H, kWarp);
  auto pair_of = [&](int i) { return static_cast<int64_t>(sorted[tile.y + i]); };
  stage_rows<WT>(xs, lay, tile.z, H, [&](int i) { return a.x + pair_of(i) / a.top_k * H; });
  __syncthreads();
  up_rows<WT, kTileTokens, 4>(a, tile.x, xs, lay, tile.z, u, pair_of);
}

// grid (max tiles, H / (kWarps * 4)): y[pair] = W2_e u[pair].
template <DType WT>
__global__ void __launch_bounds__(kThreads) moe_down_grouped_kernel(MoeArgs a, const int32_t* sorted,
                                                                    const int4* tiles, const int* num_tiles,
                                                                    const float* u, float* y) {
  constexpr int R = 4;
  extern __shared__ float4 xs[];
  if (static_cast<int>(blockIdx.x) >= *num_tiles) return;
  const int4 tile = tiles[blockIdx.x];
  const int64_t H = a.experts.hidden, I = a.experts.intermediate;
  const XLayout lay = make_layout<WT>(I, kWarp);
  stage_rows<WT>(xs, lay, tile.z, I, [&](int i) { return u + sorted[tile.y + i] * I; });
  __syncthreads();
  const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
  const int64_t n = static_cast<int64_t>(blockIdx.y) * kWarps * R + warp * R;
  float acc[R][kTileTokens] = {};
  dot_rows<WT, kTileTokens, R>(expert_w2(a.experts, tile.x), n, xs, lay, lane, tile.z, acc);
#pragma unroll
  for (int r = 0; r < R; ++r)
#pragma unroll
    for (int t = 0; t < kTileTokens; ++t) {
      const float v = warp_sum(acc[r][t]);
      if (lane == r * kTileTokens + t && t < tile.z && n + r < H) y[sorted[tile.y + t] * H + n + r] = v;
    }
}

// out[t, :] = Σ_j w[t, j] · y[t * top_k + j, :], j in slot order.
__global__ void moe_combine_kernel(MoeArgs a, const float* __restrict__ y) {
  const int64_t t = blockIdx.x, H = a.experts.hidden;
  for (int64_t h = threadIdx.x; h < H; h += blockDim.x) {
    float s = 0.0f;
    for (int j = 0; j < a.top_k; ++j) s = fmaf(a.weights[t * a.top_k + j], y[(t * a.top_k + j) * H + h], s);
    a.out[t * H + h] = s;
  }
}

// Scratch layout (byte offsets, each 256-aligned); the FP8 path's region
// first, the CUTLASS path's right after it (fp8_gemm.h, moe_cutlass.h: tests
// find them there).
struct Scratch {
  void* fp8;
  void* cutlass;
  float* u;
  float* y;
  int32_t* sorted;
  int4* tiles;
  int* num_tiles;
  void* group;  // launch_moe_group's scratch
};
Scratch carve(void* base, int64_t T, int top_k, int64_t H, int64_t I, int64_t E, bool cutlass, size_t* total) {
  const int64_t P = T * top_k;
  ScratchLayout layout(base);
  auto take = [&](size_t bytes) { return layout.take(bytes); };
  Scratch s;
  const bool fp8_shapes = H % kFp8Block == 0 && I % kFp8Block == 0;
  s.fp8 = take(fp8_shapes ? moe_fp8_scratch_bytes(T, top_k, H, I) : 0);
#if defined(M2CPP_WITH_CUTLASS)
  s.cutlass = take(fp8_shapes && cutlass ? moe_cutlass_scratch_bytes(T, top_k, H, I, E) : 0);
#else
  s.cutlass = nullptr;
#endif
  s.u = reinterpret_cast<float*>(take(sizeof(float) * P * I));
  s.y = reinterpret_cast<float*>(take(sizeof(float) * P * H));
  s.sorted = reinterpret_cast<int32_t*>(take(sizeof(int32_t) * P));
  s.tiles = reinterpret_cast<int4*>(take(sizeof(int4) * moe_group_max_tiles(P, E, kTileTokens)));  // the most tiles
  s.num_tiles = reinterpret_cast<int*>(take(sizeof(int)));
  s.group = take(moe_group_scratch_bytes(P, E));
  *total = layout.size();
  return s;
}

template <DType WT>
cudaError_t launch_typed(const MoeArgs& a, cudaStream_t stream) {
  const DeviceExperts& x = a.experts;
  const int64_t H = x.hidden, I = x.intermediate, E = x.num_experts, P = a.T * a.top_k;
  size_t total = 0;
  const Scratch s = carve(a.scratch, a.T, a.top_k, H, I, E, a.use_cutlass, &total);
  if (P <= kMoeDecodePairs && !a.always_grouped) return launch_moe_decode(a, s.u, s.y, stream);
  const size_t row_h = staged_row_float4<WT>(H, kWarp) * sizeof(float4);
  const size_t row_i = staged_row_float4<WT>(I, kWarp) * sizeof(float4);
  cudaError_t e = cudaSuccess;
  const bool tensor_cores = moe_reads_x8(a);
#if defined(M2CPP_WITH_CUTLASS)
  if (tensor_cores && a.use_cutlass) {
    // The CUTLASS path's first[] and row_of_pair written by the grouping
    // (its tiles, one per expert with pairs, are not read).
    const MoeCutlassScratch cs = moe_cutlass_carve(s.cutlass, a.T, a.top_k, H, I, E);
    if ((e = launch_moe_group({a.expert_ids, P, static_cast<int>(E), static_cast<int>(P), s.sorted, s.tiles,
                               s.num_tiles, cs.first, cs.row_of_pair, s.group},
                              stream)) != cudaSuccess)
      return e;
    const MoeFp8Scratch f = moe_fp8_carve(s.fp8, a.T, a.top_k, H, I);
    return launch_moe_cutlass(a, MoeCutlassIo{s.sorted, f.x8, f.sx, f.u8, f.su, s.u, s.y}, s.cutlass, stream);
  }
#endif
  const int tile_pairs = tensor_cores ? fp8_moe_tile_pairs(P, E) : kTileTokens;
  const unsigned tiles = static_cast<unsigned>(moe_group_max_tiles(P, E, tile_pairs));
  if ((e = launch_moe_group({a.expert_ids, P, static_cast<int>(E), tile_pairs, s.sorted, s.tiles, s.num_tiles, nullptr,
                             nullptr, s.group},
                            stream)) != cudaSuccess)
    return e;
  if (tensor_cores) {
    const MoeFp8Groups groups{s.sorted, s.tiles, s.num_tiles, tiles, tile_pairs};
    if ((e = launch_moe_fp8_experts(a, groups, s.fp8, s.y, stream)) != cudaSuccess)
      return e;
    moe_combine_kernel<<<static_cast<unsigned>(a.T), kThreads, 0, stream>>>(a, s.y);
    return cudaGetLastError();
  }
  if ((e = allow_dynamic_smem(moe_up_grouped_kernel<WT>, row_h * kTileTokens)) != cudaSuccess) return e;
  if ((e = allow_dynamic_smem(moe_down_grouped_kernel<WT>, row_i * kTileTokens)) != cudaSuccess) return e;
  moe_up_grouped_kernel<WT><<<dim3(tiles, static_cast<unsigned>(ceil_div(I, kWarps * 4))), kThreads,
                              row_h * kTileTokens, stream>>>(a, s.sorted, s.tiles, s.num_tiles, s.u);
  moe_down_grouped_kernel<WT><<<dim3(tiles, static_cast<unsigned>(ceil_div(H, kWarps * 4))), kThreads,
                                row_i * kTileTokens, stream>>>(a, s.sorted, s.tiles, s.num_tiles, s.u, s.y);
  moe_combine_kernel<<<static_cast<unsigned>(a.T), kThreads, 0, stream>>>(a, s.y);
  return cudaGetLastError();
}

}  // namespace

cudaError_t moe_quantize_x(MoeArgs& a, uint8_t* x8, float* sx, cudaStream_t stream) {
  if (a.x8) return cudaSuccess;
  a.x8 = x8, a.sx = sx;
  return launch_quantize_fp8(a.x, a.T, a.experts.hidden, a.experts.hidden, x8, sx, stream);
}

bool moe_reads_x8(const MoeArgs& a) {
  return (a.T * a.top_k > kMoeDecodePairs || a.always_grouped) && a.fp8_tensor_cores && moe_fp8_supported(a.experts);
}

size_t moe_scratch_bytes(int64_t T, int top_k, int64_t hidden, int64_t intermediate, int64_t num_experts,
                         bool cutlass) {
  size_t total = 0;
  carve(nullptr, T, top_k, hidden, intermediate, num_experts, cutlass, &total);
  return total;
}

cudaError_t launch_moe(const MoeArgs& a, cudaStream_t stream) {
  const DeviceExperts& x = a.experts;
  const DeviceWeight probe{x.w1, nullptr, x.dtype, x.intermediate, x.hidden, 0};
  const DeviceWeight probe2{x.w2, nullptr, x.dtype, x.hidden, x.intermediate, 0};
  if (a.top_k > kMoeMaxTopK || x.num_experts > kMoeGroupMaxExperts || !gemv_compatible(probe) ||
      !gemv_compatible(probe2) || x.stride13 % 16 != 0 || x.stride2 % 16 != 0)
    return cudaErrorInvalidValue;
  switch (x.dtype) {
    case DType::kF8E4M3: return launch_typed<DType::kF8E4M3>(a, stream);
    case DType::kBF16: return launch_typed<DType::kBF16>(a, stream);
    default: return cudaErrorInvalidValue;
  }
}

}  // namespace m2::cuda
