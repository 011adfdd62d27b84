// Per-token-group activation quantisation and the dense FP8 block-scaled
// GEMM on mma.sync (fp8_mma.cuh): 128 x 128 output tiles, 8 warps of 64 x 32,
// 4 pipeline stages of one 128-wide k-block each (133 KB of shared memory,
// one block per SM); steps of up to 16 rows 16 x 32 tiles of one warp.
#include <algorithm>

#include "backend/cuda/gemm/fp8_gemm.h"
#include "backend/cuda/gemm/fp8_mma.cuh"

namespace m2::cuda {
namespace {

constexpr int kQuantThreads = 256;

// One warp per (row, 128-column group): grid covers T * K / 128 groups.
__global__ void __launch_bounds__(kQuantThreads) quantize_fp8_kernel(const float* __restrict__ x, int64_t T,
                                                                     int64_t K, int64_t ldx, uint8_t* __restrict__ q,
                                                                     float* __restrict__ s) {
  const int64_t groups_per_row = K / kKBlock;
  const int64_t group = static_cast<int64_t>(blockIdx.x) * (kQuantThreads / kWarp) + threadIdx.x / kWarp;
  if (group >= T * groups_per_row) return;  // per warp: the whole warp leaves together
  const int64_t t = group / groups_per_row, kb = group % groups_per_row;
  const int lane = threadIdx.x % kWarp;
  const float4 v = *reinterpret_cast<const float4*>(x + t * ldx + kb * kKBlock + 4 * lane);
  quantize_store_group128(v, t, kb, T, K, q, s);
}

using DenseTile = Fp8Tile<128, 1, 2, 4>;
// Up to kFewRows rows (decode-size steps: the batch-invariant mode's, the
// remainder rows beside cuBLASLt): 16 x 32 tiles of one warp, so that the
// product runs on N / 32 blocks instead of N / 128 (k_proj: 32, not 8), with
// the same bits per element (Fp8Tile).
using FewRowsTile = Fp8Tile<16, 1, 1, 4, 32>;
constexpr int64_t kFewRows = 16;

// grid (N / BN, ceil(T / BM)); row t's scale of k-block kb at s[kb * s_ld + t].
template <class Cfg>
__global__ void __launch_bounds__(Cfg::kThreads)
    fp8_gemm_kernel(const uint8_t* __restrict__ q, const float* __restrict__ s, int64_t s_ld, int64_t T,
                    DeviceWeight w, float* __restrict__ y, int64_t ldy) {
  extern __shared__ __align__(16) uint8_t smem[];
  const int64_t n0 = static_cast<int64_t>(blockIdx.x) * Cfg::BN, m0 = static_cast<int64_t>(blockIdx.y) * Cfg::BM;
  const int64_t K = w.cols;
  const int tid = threadIdx.x;
  const uint8_t* a_src[Cfg::kALoads];
  bool a_ok[Cfg::kALoads];
#pragma unroll
  for (int i = 0; i < Cfg::kALoads; ++i) {
    const int64_t m = m0 + tid / 8 + i * (Cfg::kThreads / 8);
    a_ok[i] = m < T;
    a_src[i] = q + (a_ok[i] ? m : 0) * K;
  }
  const bool scale_ok = tid < Cfg::BM && m0 + tid < T;
  const float* w_scale[1] = {w.scales + (n0 / kKBlock) * w.scale_ld};
  Fp8Acc<Cfg> acc;
  fp8_tile_loop<Cfg>(smem, static_cast<int>(K / kKBlock), a_src, a_ok, s + (scale_ok ? m0 + tid : 0), scale_ok, s_ld,
                     [&](int r) { return w.data + (n0 + r) * K; }, w_scale, acc);

  const int lane = tid % kWarp, warp = tid / kWarp;
  const int wm = warp / Cfg::kWarpsN, wn = warp % Cfg::kWarpsN, g = lane / 4, t4 = lane % 4;
#pragma unroll
  for (int i = 0; i < Cfg::MT; ++i)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int64_t m = m0 + wm * Cfg::WM + i * 16 + g + 8 * h;
      if (m >= T) continue;
#pragma unroll
      for (int j = 0; j < Cfg::NT; ++j) {
        const int64_t n = n0 + wn * Cfg::kColsPerWarp + j * 8 + 2 * t4;
        *reinterpret_cast<float2*>(y + m * ldy + n) = make_float2(acc[i][j][2 * h], acc[i][j][2 * h + 1]);
      }
    }
}

template <class Cfg>
cudaError_t launch_tiles(const uint8_t* q, const float* s, int64_t s_ld, int64_t T, const DeviceWeight& w, float* y,
                         int64_t ldy, cudaStream_t stream) {
  const cudaError_t e = allow_dynamic_smem(fp8_gemm_kernel<Cfg>, Cfg::kSmemBytes);
  if (e != cudaSuccess) return e;
  const dim3 grid(static_cast<unsigned>(w.rows / Cfg::BN), static_cast<unsigned>(ceil_div(T, Cfg::BM)));
  fp8_gemm_kernel<Cfg><<<grid, Cfg::kThreads, Cfg::kSmemBytes, stream>>>(q, s, s_ld, T, w, y, ldy);
  return cudaGetLastError();
}

}  // namespace

bool fp8_gemm_supported(const DeviceWeight& w) {
  return w.dtype == DType::kF8E4M3 && w.data && w.scales && w.rows > 0 && w.rows % kKBlock == 0 && w.cols > 0 &&
         w.cols % kKBlock == 0 && w.scale_ld == w.cols / kKBlock &&
         reinterpret_cast<uintptr_t>(w.data) % 16 == 0 && reinterpret_cast<uintptr_t>(w.scales) % 4 == 0;
}

size_t fp8_gemm_smem_bytes() { return std::max(DenseTile::kSmemBytes, FewRowsTile::kSmemBytes); }

cudaError_t launch_quantize_fp8(const float* x, int64_t T, int64_t K, int64_t ldx, uint8_t* q, float* s,
                                cudaStream_t stream) {
  if (K % kKBlock != 0 || ldx % 4 != 0 || reinterpret_cast<uintptr_t>(x) % 16 != 0 ||
      reinterpret_cast<uintptr_t>(q) % 4 != 0)
    return cudaErrorInvalidValue;
  if (T == 0) return cudaSuccess;
  const int64_t groups = T * (K / kKBlock);
  const int64_t blocks = ceil_div(groups, kQuantThreads / kWarp);
  quantize_fp8_kernel<<<static_cast<unsigned>(blocks), kQuantThreads, 0, stream>>>(x, T, K, ldx, q, s);
  return cudaGetLastError();
}

cudaError_t launch_fp8_gemm(const uint8_t* q, const float* s, int64_t T, const DeviceWeight& w, float* y,
                            int64_t ldy, cudaStream_t stream, int64_t s_ld) {
  if (s_ld == 0) s_ld = T;
  if (!fp8_gemm_supported(w) || ldy % 2 != 0 || ldy < w.rows || reinterpret_cast<uintptr_t>(y) % 8 != 0 || s_ld < T ||
      reinterpret_cast<uintptr_t>(q) % 16 != 0 || ceil_div(T, DenseTile::BM) > 65535)
    return cudaErrorInvalidValue;
  if (T == 0) return cudaSuccess;
  return T <= kFewRows ? launch_tiles<FewRowsTile>(q, s, s_ld, T, w, y, ldy, stream)
                       : launch_tiles<DenseTile>(q, s, s_ld, T, w, y, ldy, stream);
}

}  // namespace m2::cuda
