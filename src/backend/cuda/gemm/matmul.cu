// y = x · Wᵀ with W in its stored dtype (FP8 e4m3 with 128 x 128 block scales,
// BF16, F16, F32) and fp32 activations and accumulation.
//
// - Up to kGemvMaxTokens tokens (decode): W is streamed once per pass at
//   memory speed. FP8 weights with K % 128 == 0 go to tensor cores
//   (gemv_mma.cuh, 8 tokens per pass), the rest to the GEMV core (gemv.cuh,
//   4 tokens per pass).
// - More tokens: a 64 x 64 tiled SIMT kernel, W decoded into shared memory.
//   Correct for any shape; BF16 weights go to tensor cores instead
//   (bf16_matmul.h; their activation split is here: launch_split_bf16), FP8
//   weights too (fp8_gemm.h). Which one runs: matmul_plan.h.
#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "backend/cuda/gemm/bf16_matmul.h"
#include "backend/cuda/gemm/gemv.cuh"
#include "backend/cuda/gemm/gemv_mma.cuh"
#include "backend/cuda/gemm/matmul.h"

namespace m2::cuda {
namespace {

constexpr int kGemvThreads = 256;
constexpr int kGemvWarps = kGemvThreads / kWarp;

template <int TM>
__host__ __device__ constexpr int gemv_rows_per_warp() { return TM == 1 ? 2 : 4; }

// One block: kGemvWarps / G groups of G warps, each group R rows per step;
// blocks stride over the rows (persistent grid).
// Launched early (launch_pdl): the block's first rows of W are prefetched
// into L2 while the kernel before it finishes, then it waits for x.
template <DType WT, int TM>
__global__ void __launch_bounds__(kGemvThreads) gemv_kernel(const float* __restrict__ x, int64_t ldx, int T,
                                                            DeviceWeight w, MatmulOut out, int G) {
  constexpr int R = gemv_rows_per_warp<TM>();
  extern __shared__ float4 xs[];
  __shared__ float red[kGemvWarps][R][TM];
  const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
  const int group = warp / G, q = (warp % G) * kWarp + lane;
  const int64_t rows_per_block = static_cast<int64_t>(kGemvWarps / G) * R;
  if (threadIdx.x == 0) prefetch_rows_l2<WT>(w, blockIdx.x * rows_per_block, rows_per_block);
  grid_dependency_wait();
  allow_dependents();
  const XLayout lay = make_layout<WT>(w.cols, kWarp * G);
  stage_rows<WT>(xs, lay, T, w.cols, [&](int t) { return x + t * ldx; });
  __syncthreads();

  for (int64_t base = blockIdx.x * rows_per_block; base < w.rows; base += gridDim.x * rows_per_block) {
    const int64_t n = base + group * R;
    float acc[R][TM] = {};
    dot_rows<WT, TM, R>(w, n, xs, lay, q, T, acc);
#pragma unroll
    for (int r = 0; r < R; ++r)
#pragma unroll
      for (int t = 0; t < TM; ++t) acc[r][t] = warp_sum(acc[r][t]);
    if (G > 1) {  // sum the G warps of each group, in warp order
      if (lane == 0) {
#pragma unroll
        for (int r = 0; r < R; ++r)
#pragma unroll
          for (int t = 0; t < TM; ++t) red[warp][r][t] = acc[r][t];
      }
      __syncthreads();
      if (warp % G == 0) {
#pragma unroll
        for (int r = 0; r < R; ++r)
#pragma unroll
          for (int t = 0; t < TM; ++t) {
            float s = red[warp][r][t];
            for (int g = 1; g < G; ++g) s += red[warp + g][r][t];
            acc[r][t] = s;
          }
      }
      __syncthreads();
    }
    if (warp % G == 0) {
#pragma unroll
      for (int r = 0; r < R; ++r)
#pragma unroll
        for (int t = 0; t < TM; ++t)
          if (lane == r * TM + t && t < T && n + r < w.rows) {
            const int64_t row = n + r;
            const int seg = (row >= out.end[0]) + (row >= out.end[1]);
            out.y[seg][t * out.ld[seg] + row - (seg == 0 ? 0 : out.end[seg - 1])] = acc[r][t];
          }
    }
  }
}

// y = x · Wᵀ for T <= kMmaMaxTokens tokens, FP8 W on tensor cores. Each
// group of `splits` warps computes one 8-row tile at a time, warp s of the
// group the s-th K range, summed in the group (mma_group_publish); tiles are
// spread over the blocks by mma_tile_of.
__global__ void __launch_bounds__(kMmaThreads, 1) gemv_mma_kernel(const float* __restrict__ x, int64_t ldx, int T,
                                                                  DeviceWeight w, MatmulOut out, int splits) {
  extern __shared__ float4 staged[];  // [T, K] as hi + lo (gemv_mma.cuh)
  uint4* xs = reinterpret_cast<uint4*>(staged);
  __shared__ float descale[kMmaMaxTokens];
  __shared__ float part[kMmaWarps][64];
  __shared__ uint4 zeros[4];
  const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp, g = lane / 4, t = lane % 4;
  const int group = warp / splits, split = warp % splits;
  const int64_t K = w.cols, tiles = ceil_div(w.rows, kMmaTileRows), per = K / kMmaStepCols / splits;
  const int s0 = static_cast<int>(split * per), s1 = static_cast<int>(s0 + per);
  if (threadIdx.x < 4) zeros[threadIdx.x] = make_uint4(0, 0, 0, 0);
  MmaTile m;
  auto begin = [&](int64_t tile) {
    const int64_t n0 = tile * kMmaTileRows;
    const int rows = static_cast<int>(w.rows - n0 < kMmaTileRows ? w.rows - n0 : kMmaTileRows);
    mma_tile_begin(m, w.data + n0 * K, K, rows, w.scales + (n0 / kScaleBlock) * w.scale_ld, s0, s1);
  };
  // The first tile's first loads go out before the wait (launched early:
  // they overlap the kernel before this one and the staging below).
  if (mma_tile_of(splits, 0, group) < tiles) begin(mma_tile_of(splits, 0, group));
  grid_dependency_wait();
  allow_dependents();
  stage_split_rows(xs, descale, T, K, [&](int i) { return x + i * ldx; });
  for (int64_t r = 0;; ++r) {
    const int64_t tile = mma_tile_of(splits, r, group), n0 = tile * kMmaTileRows;
    if (tile >= tiles) break;
    if (r > 0) begin(tile);
    float acc[4] = {0.f, 0.f, 0.f, 0.f};
    mma_tile_dot(m, K, xs, T, zeros, acc);
    float2 sum = make_float2(acc[0], acc[1]);
    if (splits > 1) {
      mma_group_publish(acc, splits, part);
      if (split == 0) sum = mma_parts_sum(part, warp, 0, splits);
      mma_group_release(splits);
    }
    if (split != 0 || g >= T) continue;
#pragma unroll
    for (int r2 = 0; r2 < 2; ++r2) {
      const int64_t row = n0 + 2 * t + r2;
      if (row >= w.rows) continue;
      const int seg = (row >= out.end[0]) + (row >= out.end[1]);
      out.y[seg][g * out.ld[seg] + row - (seg == 0 ? 0 : out.end[seg - 1])] = (r2 == 0 ? sum.x : sum.y) * descale[g];
    }
  }
}

// Tiled SIMT GEMM: a 64 x 64 tile of y per block, 4 x 4 per thread, K in
// steps of 32 through shared memory (W decoded and scaled on the way in).
constexpr int kTile = 64, kTileK = 32, kTileThreads = 256;

template <DType WT>
__global__ void __launch_bounds__(kTileThreads) gemm_tiled_kernel(const float* __restrict__ x, int64_t M, int64_t ldx,
                                                                  DeviceWeight w, float* __restrict__ y, int64_t ldy) {
  __shared__ __align__(16) float As[kTileK][kTile + 4];
  __shared__ __align__(16) float Bs[kTileK][kTile + 4];
  const int64_t m0 = static_cast<int64_t>(blockIdx.y) * kTile, n0 = static_cast<int64_t>(blockIdx.x) * kTile;
  const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
  const int64_t K = w.cols;
  float acc[4][4] = {};
  for (int64_t k0 = 0; k0 < K; k0 += kTileK) {
    // Loads: thread covers column kk of rows rr, rr + 8, ... (coalesced along k).
    const int kk = threadIdx.x % kTileK, rr = threadIdx.x / kTileK;
    const int64_t k = k0 + kk;
#pragma unroll
    for (int i = 0; i < kTile / 8; ++i) {
      const int row = rr + 8 * i;
      const int64_t m = m0 + row, n = n0 + row;
      As[kk][row] = (m < M && k < K) ? x[m * ldx + k] : 0.0f;
      float b = 0.0f;
      if (n < w.rows && k < K) {
        b = Stored<WT>::load1(w.data, n * K + k);
        if constexpr (WT == DType::kF8E4M3) b *= w.scales[(n / kScaleBlock) * w.scale_ld + k / kScaleBlock];
      }
      Bs[kk][row] = b;
    }
    __syncthreads();
#pragma unroll 8
    for (int kq = 0; kq < kTileK; ++kq) {
      const float4 a = *reinterpret_cast<const float4*>(&As[kq][ty * 4]);
      const float4 b = *reinterpret_cast<const float4*>(&Bs[kq][tx * 4]);
      const float av[4] = {a.x, a.y, a.z, a.w}, bv[4] = {b.x, b.y, b.z, b.w};
#pragma unroll
      for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) acc[i][j] = fmaf(av[i], bv[j], acc[i][j]);
    }
    __syncthreads();
  }
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int64_t m = m0 + ty * 4 + i;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int64_t n = n0 + tx * 4 + j;
      if (m < M && n < w.rows) y[m * ldy + n] = acc[i][j];
    }
  }
}

// Warps per weight row: enough blocks to cover the GPU even for short
// matrices (k/v projections). A function of the shape only (not of the token
// count), so a token's result does not depend on the batch it is in.
int gemv_warps_per_row(int64_t rows, int num_sms) {
  int G = 1;
  while (G < kGemvWarps && ceil_div(rows, (kGemvWarps / G) * gemv_rows_per_warp<1>()) < 2 * num_sms) G *= 2;
  return G;
}

template <DType WT, int TM>
cudaError_t launch_gemv(const float* x, int64_t T, int64_t ldx, const DeviceWeight& w, const MatmulOut& y,
                        int num_sms, cudaStream_t stream) {
  constexpr int R = gemv_rows_per_warp<TM>();
  const int G = gemv_warps_per_row(w.rows, num_sms);
  const size_t smem = staged_row_float4<WT>(w.cols, kWarp * G) * TM * sizeof(float4);
  cudaError_t e = allow_dynamic_smem(gemv_kernel<WT, TM>, smem);
  if (e != cudaSuccess) return e;
  const int64_t blocks = std::min<int64_t>(ceil_div(w.rows, (kGemvWarps / G) * R), 4ll * num_sms);
  for (int64_t t0 = 0; t0 < T; t0 += TM) {
    const int n = static_cast<int>(std::min<int64_t>(TM, T - t0));
    MatmulOut part = y;
    for (int i = 0; i < 3; ++i) part.y[i] += t0 * part.ld[i];
    e = launch_pdl(gemv_kernel<WT, TM>, static_cast<unsigned>(blocks), kGemvThreads, smem, stream, x + t0 * ldx, ldx, n,
                   w, part, G);
    if (e != cudaSuccess) return e;
  }
  return cudaSuccess;
}

bool gemv_mma_fits(const float* x, int64_t T, int64_t ldx, const DeviceWeight& w) {
  return w.dtype == DType::kF8E4M3 && T <= kGemvMaxTokens && w.cols % kScaleBlock == 0 &&
         gemv_compatible(w) && reinterpret_cast<uintptr_t>(x) % 16 == 0 && ldx % 4 == 0 &&
         static_cast<size_t>(mma_staged_bytes(1, w.cols)) <= kMaxDynamicSmem;
}

cudaError_t launch_gemv_mma(const float* x, int64_t T, int64_t ldx, const DeviceWeight& w, const MatmulOut& y,
                            int num_sms, cudaStream_t stream) {
  const int64_t K = w.cols, tiles = ceil_div(w.rows, kMmaTileRows);
  const int64_t per_pass = std::min<int64_t>(kMmaMaxTokens, kMaxDynamicSmem / mma_staged_bytes(1, K));
  const MmaSchedule sched = choose_mma_split(tiles, K / kMmaStepCols, num_sms);
  const size_t smem = mma_staged_bytes(std::min(T, per_pass), K);
  cudaError_t e = allow_dynamic_smem(gemv_mma_kernel, smem);
  for (int64_t t0 = 0; t0 < T && e == cudaSuccess; t0 += per_pass) {
    const int n = static_cast<int>(std::min<int64_t>(per_pass, T - t0));
    MatmulOut part = y;
    for (int i = 0; i < 3; ++i) part.y[i] += t0 * part.ld[i];
    e = launch_pdl(gemv_mma_kernel, static_cast<unsigned>(sched.blocks), kMmaThreads, mma_staged_bytes(n, K), stream,
                   x + t0 * ldx, ldx, n, w, part, sched.splits);
  }
  return e;
}

template <DType WT>
bool gemv_fits(const float* x, int64_t T, int64_t ldx, const DeviceWeight& w) {
  const bool aligned = gemv_compatible(w) && reinterpret_cast<uintptr_t>(x) % 16 == 0 && ldx % 4 == 0;
  const size_t smem4 = staged_row_float4<WT>(w.cols, kWarp * kGemvWarps) * 4 * sizeof(float4);
  return aligned && smem4 <= kMaxDynamicSmem;  // any T: launch_gemv takes TM tokens a pass
}

template <DType WT>
cudaError_t launch_planned(MatmulKernel kernel, const float* x, int64_t T, int64_t ldx, const DeviceWeight& w,
                           const MatmulOut& y, int num_sms, cudaStream_t stream) {
  const bool single = y.y[1] == y.y[0] && y.y[2] == y.y[0];
  switch (kernel) {
    case MatmulKernel::kGemvMma:
      if (!gemv_fits<WT>(x, T, ldx, w) || !gemv_mma_fits(x, T, ldx, w)) return cudaErrorInvalidValue;
      return launch_gemv_mma(x, T, ldx, w, y, num_sms, stream);
    case MatmulKernel::kGemv:
      if (!gemv_fits<WT>(x, T, ldx, w)) return cudaErrorInvalidValue;
      return T == 1 ? launch_gemv<WT, 1>(x, T, ldx, w, y, num_sms, stream)
                    : launch_gemv<WT, 4>(x, T, ldx, w, y, num_sms, stream);
    case MatmulKernel::kTiledSimt: {
      if (!single) return cudaErrorInvalidValue;
      const dim3 grid(static_cast<unsigned>(ceil_div(w.rows, kTile)), static_cast<unsigned>(ceil_div(T, kTile)));
      gemm_tiled_kernel<WT><<<grid, kTileThreads, 0, stream>>>(x, T, ldx, w, y.y[0], y.ld[0]);
      return cudaGetLastError();
    }
    default: return cudaErrorInvalidValue;  // the FP8 and BF16 tensor-core paths are fp8_gemm.h's and bf16_matmul.h's
  }
}

constexpr int kSplitThreads = 256;

// One thread per 4 consecutive activations of a row: hi = bf16_rn(x), lo =
// bf16_rn(x - hi) (x - hi is exact in fp32, bf16_matmul.h); q indexes the
// float4 of x [T, K] and the 4-value (8-byte) groups of hi and lo [T, K].
__global__ void __launch_bounds__(kSplitThreads) split_bf16_kernel(const float* __restrict__ x, int64_t T, int64_t K,
                                                                   int64_t ldx, uint2* __restrict__ hi,
                                                                   uint2* __restrict__ lo) {
  const int64_t q = static_cast<int64_t>(blockIdx.x) * kSplitThreads + threadIdx.x, per_row = K / 4;
  if (q >= T * per_row) return;
  const float4 v = *reinterpret_cast<const float4*>(x + (q / per_row) * ldx + 4 * (q % per_row));
  const float f[4] = {v.x, v.y, v.z, v.w};
  uint32_t h[4], l[4];
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    const __nv_bfloat16 b = __float2bfloat16_rn(f[j]);
    const float hf = __bfloat162float(b);
    h[j] = __bfloat16_as_ushort(b);
    l[j] = isfinite(hf) ? __bfloat16_as_ushort(__float2bfloat16_rn(f[j] - hf)) : 0u;  // inf - inf would be NaN
  }
  hi[q] = make_uint2(h[0] | h[1] << 16, h[2] | h[3] << 16);
  lo[q] = make_uint2(l[0] | l[1] << 16, l[2] | l[3] << 16);
}

}  // namespace

cudaError_t launch_split_bf16(const float* x, int64_t T, int64_t K, int64_t ldx, uint16_t* hi, uint16_t* lo,
                              cudaStream_t stream) {
  if (K % 4 != 0 || ldx % 4 != 0 || reinterpret_cast<uintptr_t>(x) % 16 != 0 ||
      reinterpret_cast<uintptr_t>(hi) % 8 != 0 || reinterpret_cast<uintptr_t>(lo) % 8 != 0)
    return cudaErrorInvalidValue;
  const int64_t groups = T * (K / 4);
  if (groups == 0) return cudaSuccess;
  split_bf16_kernel<<<static_cast<unsigned>(ceil_div(groups, kSplitThreads)), kSplitThreads, 0, stream>>>(
      x, T, K, ldx, reinterpret_cast<uint2*>(hi), reinterpret_cast<uint2*>(lo));
  return cudaGetLastError();
}

MatmulOut single_out(float* y, int64_t ldy, int64_t rows) {
  MatmulOut o;
  o.y[0] = o.y[1] = o.y[2] = y;
  o.ld[0] = o.ld[1] = o.ld[2] = ldy;
  o.end[0] = o.end[1] = rows;
  return o;
}

cudaError_t launch_matmul(MatmulKernel kernel, const float* x, int64_t T, int64_t ldx, const DeviceWeight& w,
                          const MatmulOut& y, int num_sms, cudaStream_t stream) {
  switch (w.dtype) {
    case DType::kF8E4M3: return launch_planned<DType::kF8E4M3>(kernel, x, T, ldx, w, y, num_sms, stream);
    case DType::kBF16: return launch_planned<DType::kBF16>(kernel, x, T, ldx, w, y, num_sms, stream);
    case DType::kF16: return launch_planned<DType::kF16>(kernel, x, T, ldx, w, y, num_sms, stream);
    case DType::kF32: return launch_planned<DType::kF32>(kernel, x, T, ldx, w, y, num_sms, stream);
    default: return cudaErrorInvalidValue;
  }
}

}  // namespace m2::cuda
