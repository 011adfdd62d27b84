// The grouped MoE experts on FP8 tensor cores (fp8_mma.cuh), for many
// (token, expert) pairs; moe.cu groups the pairs by expert before and
// combines each token's k results in slot order after.
//   1. x [T, H] -> x8 + sx (per token, per 128 channels), unless x's
//      producer wrote them (MoeArgs::x8);
//   2. up: a block takes one tile of up to 64 pairs of one expert (token rows
//      of x8 gathered by index) x 128 columns of I, with the W1 and W3 rows
//      of those columns (B = 256 rows); epilogue u = silu(gate) * up,
//      quantised per pair over its 128 columns -> u8 + su (row = pair);
//   3. down: the same tiles x 128 columns of H against W2 -> y [P, H].
#include <algorithm>

#include "backend/cuda/gemm/fp8_gemm.h"
#include "backend/cuda/gemm/fp8_mma.cuh"
#include "backend/cuda/moe/experts.cuh"
#include "backend/cuda/moe/moe.h"
#include "backend/cuda/runtime/device_buffer.h"

namespace m2::cuda {
namespace {

using UpTile = Fp8Tile<kFp8MoeTilePairs, 2, 2, 4>;    // 165 KB of shared memory
using DownTile = Fp8Tile<kFp8MoeTilePairs, 1, 2, 4>;  // 99 KB
using FewUpTile = Fp8Tile<kFp8MoeFewTilePairs, 2, 1, 4>;    // 139 KB
using FewDownTile = Fp8Tile<kFp8MoeFewTilePairs, 1, 1, 4>;  // 74 KB


// The A side of a tile: rows r < count of the tile are `row_of(r)` of a
// matrix of e4m3 rows of `ld` bytes with k-block-major scales (ld `scale_ld`).
template <class Cfg, class RowOf>
struct GatherA {
  const uint8_t* src[Cfg::kALoads];
  bool ok[Cfg::kALoads];
  const float* scale;
  bool scale_ok;

  __device__ GatherA(const uint8_t* a, int64_t ld, const float* scales, int count, RowOf row_of) {
    const int tid = threadIdx.x;
#pragma unroll
    for (int i = 0; i < Cfg::kALoads; ++i) {
      const int r = tid / 8 + i * (Cfg::kThreads / 8);
      ok[i] = r < count;
      src[i] = a + (ok[i] ? row_of(r) : 0) * ld;
    }
    scale_ok = tid < count;  // count <= BM <= threads
    scale = scales + (scale_ok ? row_of(tid) : 0);
  }
};

// grid (max tiles, I / 128); x quantised in a.x8, a.sx.
template <class Cfg>
__global__ void __launch_bounds__(Cfg::kThreads, 1)
    moe_fp8_up_kernel(MoeArgs a, MoeFp8Groups gr, MoeFp8Scratch s) {
  extern __shared__ __align__(16) uint8_t smem[];
  if (static_cast<int>(blockIdx.x) >= *gr.num_tiles) return;
  const int4 tile = gr.tiles[blockIdx.x];
  const DeviceExperts& x = a.experts;
  const int64_t H = x.hidden, I = x.intermediate, P = a.T * a.top_k, first = tile.y;
  const int64_t n0 = static_cast<int64_t>(blockIdx.y) * 128;
  const int count = tile.z;
  auto token_of = [&](int r) { return static_cast<int64_t>(gr.sorted[first + r] / a.top_k); };
  const GatherA<Cfg, decltype(token_of)> A(a.x8, H, a.sx, count, token_of);
  const uint8_t* w1 = x.w1 + tile.x * x.stride13;
  const uint8_t* w3 = x.w3 + tile.x * x.stride13;
  const int64_t kbs = H / kKBlock;
  const float* w_scale[2] = {reinterpret_cast<const float*>(w1 + x.scale_off13) + (n0 / kKBlock) * kbs,
                             reinterpret_cast<const float*>(w3 + x.scale_off13) + (n0 / kKBlock) * kbs};
  Fp8Acc<Cfg> acc;
  fp8_tile_loop<Cfg>(smem, static_cast<int>(kbs), A.src, A.ok, A.scale, A.scale_ok, a.T,
                     [&](int r) { return r < 128 ? w1 + (n0 + r) * H : w3 + (n0 + r - 128) * H; }, w_scale, acc);

  // SwiGLU: group 0 (n-tiles j < NTG) holds the gate, group 1 the up
  // projection of the same columns.
  const int tid = threadIdx.x, lane = tid % kWarp, warp = tid / kWarp;
  const int wm = warp / Cfg::kWarpsN, wn = warp % Cfg::kWarpsN, g = lane / 4, t4 = lane % 4;
  float u[Cfg::MT][Cfg::NTG][4];
  float amax[Cfg::MT][2] = {};
#pragma unroll
  for (int i = 0; i < Cfg::MT; ++i)
#pragma unroll
    for (int j = 0; j < Cfg::NTG; ++j)
#pragma unroll
      for (int r = 0; r < 4; ++r) {
        u[i][j][r] = silu_mul(acc[i][j][r], acc[i][j + Cfg::NTG][r]);
        amax[i][r / 2] = fmaxf(amax[i][r / 2], fabsf(u[i][j][r]));
      }
  // Row amax over the block's 128 columns: the 4 lanes of a row group, then
  // the 4 warps of a row (smem is free after the tile loop).
  float* red = reinterpret_cast<float*>(smem);  // [kWarpsN][BM]
#pragma unroll
  for (int i = 0; i < Cfg::MT; ++i)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      float m = amax[i][h];
      m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, 1));
      m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, 2));
      if (t4 == 0) red[wn * Cfg::BM + wm * Cfg::WM + i * 16 + g + 8 * h] = m;
    }
  __syncthreads();
#pragma unroll
  for (int i = 0; i < Cfg::MT; ++i)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int row = wm * Cfg::WM + i * 16 + g + 8 * h;
      if (row >= count) continue;
      float m = red[row];
#pragma unroll
      for (int w = 1; w < Cfg::kWarpsN; ++w) m = fmaxf(m, red[w * Cfg::BM + row]);
      const float scale = fp8_group_scale(m);
      const int64_t p = gr.sorted[first + row];
#pragma unroll
      for (int j = 0; j < Cfg::NTG; ++j) {
        const int64_t n = n0 + wn * Cfg::kColsPerWarp + j * 8 + 2 * t4;
        const uint16_t codes = static_cast<uint16_t>(fp8_code(u[i][j][2 * h], scale) |
                                                     fp8_code(u[i][j][2 * h + 1], scale) << 8);
        *reinterpret_cast<uint16_t*>(s.u8 + p * I + n) = codes;
      }
      if (wn == 0 && t4 == 0) s.su[(n0 / kKBlock) * P + p] = scale;
    }
}

// grid (max tiles, H / 128): y[p] = W2_e u8[p] for the tile's pairs p.
template <class Cfg>
__global__ void __launch_bounds__(Cfg::kThreads, 1)
    moe_fp8_down_kernel(MoeArgs a, MoeFp8Groups gr, MoeFp8Scratch s, float* __restrict__ y) {
  extern __shared__ __align__(16) uint8_t smem[];
  if (static_cast<int>(blockIdx.x) >= *gr.num_tiles) return;
  const int4 tile = gr.tiles[blockIdx.x];
  const DeviceExperts& x = a.experts;
  const int64_t H = x.hidden, I = x.intermediate, P = a.T * a.top_k, first = tile.y;
  const int64_t n0 = static_cast<int64_t>(blockIdx.y) * 128;
  const int count = tile.z;
  auto pair_of = [&](int r) { return static_cast<int64_t>(gr.sorted[first + r]); };
  const GatherA<Cfg, decltype(pair_of)> A(s.u8, I, s.su, count, pair_of);
  const uint8_t* w2 = x.w2 + tile.x * x.stride2;
  const int64_t kbs = I / kKBlock;
  const float* w_scale[1] = {reinterpret_cast<const float*>(w2 + x.scale_off2) + (n0 / kKBlock) * kbs};
  Fp8Acc<Cfg> acc;
  fp8_tile_loop<Cfg>(smem, static_cast<int>(kbs), A.src, A.ok, A.scale, A.scale_ok, P,
                     [&](int r) { return w2 + (n0 + r) * I; }, w_scale, acc);

  const int tid = threadIdx.x, lane = tid % kWarp, warp = tid / kWarp;
  const int wm = warp / Cfg::kWarpsN, wn = warp % Cfg::kWarpsN, g = lane / 4, t4 = lane % 4;
#pragma unroll
  for (int i = 0; i < Cfg::MT; ++i)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int row = wm * Cfg::WM + i * 16 + g + 8 * h;
      if (row >= count) continue;
      const int64_t p = pair_of(row);
#pragma unroll
      for (int j = 0; j < Cfg::NT; ++j) {
        const int64_t n = n0 + wn * Cfg::kColsPerWarp + j * 8 + 2 * t4;
        *reinterpret_cast<float2*>(y + p * H + n) = make_float2(acc[i][j][2 * h], acc[i][j][2 * h + 1]);
      }
    }
}

// Scratch layout (each region 256-aligned); *total gets its size.
MoeFp8Scratch carve(void* scratch, int64_t T, int top_k, int64_t H, int64_t I, size_t* total) {
  const int64_t P = T * top_k;
  ScratchLayout layout(scratch);
  auto take = [&](size_t bytes) { return layout.take(bytes); };
  MoeFp8Scratch s;
  s.x8 = take(static_cast<size_t>(T * H));
  s.sx = reinterpret_cast<float*>(take(sizeof(float) * (H / kKBlock) * T));
  s.u8 = take(static_cast<size_t>(P * I));
  s.su = reinterpret_cast<float*>(take(sizeof(float) * (I / kKBlock) * P));
  if (total) *total = layout.size();
  return s;
}

// q: a with x8, sx set (the up pass reads them).
template <class Up, class Down>
cudaError_t launch_tiles(const MoeArgs& q, const MoeArgs& a, const MoeFp8Groups& groups, const MoeFp8Scratch& s,
                         float* y, cudaStream_t stream) {
  static_assert(Up::BM == Down::BM, "one grouping serves both passes");
  const DeviceExperts& x = a.experts;
  cudaError_t e;
  if ((e = allow_dynamic_smem(moe_fp8_up_kernel<Up>, Up::kSmemBytes)) != cudaSuccess) return e;
  if ((e = allow_dynamic_smem(moe_fp8_down_kernel<Down>, Down::kSmemBytes)) != cudaSuccess) return e;
  const unsigned tiles = static_cast<unsigned>(groups.max_tiles);
  moe_fp8_up_kernel<Up><<<dim3(tiles, static_cast<unsigned>(x.intermediate / 128)), Up::kThreads, Up::kSmemBytes,
                          stream>>>(q, groups, s);
  moe_fp8_down_kernel<Down><<<dim3(tiles, static_cast<unsigned>(x.hidden / 128)), Down::kThreads, Down::kSmemBytes,
                              stream>>>(a, groups, s, y);
  return cudaGetLastError();
}

}  // namespace

bool moe_fp8_supported(const DeviceExperts& x) {
  return x.dtype == DType::kF8E4M3 && x.hidden > 0 && x.hidden % kKBlock == 0 && x.intermediate > 0 &&
         x.intermediate % kKBlock == 0 && x.stride13 % 16 == 0 && x.stride2 % 16 == 0 && x.scale_off13 % 4 == 0 &&
         x.scale_off2 % 4 == 0 && reinterpret_cast<uintptr_t>(x.w1) % 16 == 0 &&
         reinterpret_cast<uintptr_t>(x.w3) % 16 == 0 && reinterpret_cast<uintptr_t>(x.w2) % 16 == 0;
}

size_t moe_fp8_smem_bytes() {
  return std::max({UpTile::kSmemBytes, DownTile::kSmemBytes, FewUpTile::kSmemBytes, FewDownTile::kSmemBytes});
}

MoeFp8Scratch moe_fp8_carve(void* scratch, int64_t T, int top_k, int64_t hidden, int64_t intermediate) {
  return carve(scratch, T, top_k, hidden, intermediate, nullptr);
}

size_t moe_fp8_scratch_bytes(int64_t T, int top_k, int64_t hidden, int64_t intermediate) {
  size_t total = 0;
  carve(nullptr, T, top_k, hidden, intermediate, &total);
  return total;
}

cudaError_t launch_moe_fp8_experts(const MoeArgs& a, const MoeFp8Groups& groups, void* scratch, float* y,
                                   cudaStream_t stream) {
  const DeviceExperts& x = a.experts;
  if (!moe_fp8_supported(x) || groups.max_tiles <= 0) return cudaErrorInvalidValue;
  const MoeFp8Scratch s = moe_fp8_carve(scratch, a.T, a.top_k, x.hidden, x.intermediate);
  MoeArgs q = a;  // with x8, sx set: the producer's, or ours in the scratch
  cudaError_t e = moe_quantize_x(q, s.x8, s.sx, stream);
  if (e != cudaSuccess) return e;
  if (groups.tile_pairs == kFp8MoeFewTilePairs) return launch_tiles<FewUpTile, FewDownTile>(q, a, groups, s, y, stream);
  if (groups.tile_pairs == kFp8MoeTilePairs) return launch_tiles<UpTile, DownTile>(q, a, groups, s, y, stream);
  return cudaErrorInvalidValue;
}

}  // namespace m2::cuda
