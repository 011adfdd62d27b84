// The decode MoE's down pass on Hopper's tensor cores (wgmma, sm_90a):
// y[p, n] = W2_e[n, :] · u[p, :] for each (token, expert) pair p of expert
// e = ids[p], then out[t, n] = Σ_j w[t, j] y[t k + j, n]. Same accuracy as
// the SIMT streaming kernel of moe_decode.cu (the fallback elsewhere, and
// with the moe_decode_wgmma variant off), fewer instructions:
// the e4m3 weights become f16 exactly (one cvt per 2 weights) and the
// activations enter as f16 hi + lo in two B columns after a power-of-two
// scaling of the row (gemv_mma.cuh's scheme: ~fp32 accuracy for any
// magnitude), summed in fp32 by the tensor core.
//
// A block is one warpgroup (128 threads) and one 64-row tile of one pair's
// W2, grid (pairs, H / 64): its weights go from HBM straight into registers
// (D stages of 128 columns in flight per thread), converted into wgmma's A
// fragments (wgmma.cuh) just before use; u's row is B's columns 0 (hi) and
// 1 (lo) in shared memory (columns 2..7 zero). Each 128-column block is
// summed by the tensor core from zero (8 k16 steps) and folded into fp32 with
// its weight scale. Thread (warp w, lane 4 g + q) loads 16 bytes at columns
// 64 s + 16 q of its rows 16 w + g and 16 w + g + 8 for each 64-column step
// s: each row's 64 bytes of a step come from one quad, and the fragments'
// k order is a permutation of the physical columns that the staged B
// follows (b_word).
//
// The block starts early (launch_pdl) and issues its first W2 stages before
// waiting for the up kernel: the expert ids are the router's, which finished
// before the up kernel passed its own wait, and the up kernel lets this one
// start only after that. The last of a token's top_k blocks of a tile (a
// counter per (token, tile)) sums their rows in slot order: the result does
// not depend on which block finishes last.
#include <cstdlib>
#include <cstring>

#include "backend/cuda/gemm/gemv_mma.cuh"
#include "backend/cuda/gemm/wgmma.cuh"
#include "backend/cuda/moe/moe.h"
#include "backend/cuda/moe/moe_decode.h"
#include "backend/cuda/runtime/async_copy.cuh"

namespace m2::cuda {
namespace {

constexpr int kThreads = 128;  // one warpgroup
constexpr int kTileRows = 64;
constexpr int kBlockCols = 128;  // FP8 scale block: one fold into fp32
constexpr int kStepBytes = 256;  // staged B of one k16 step: 2 core matrices of 8 columns x 16 bytes
constexpr int kDepth = 6;        // stages of 128 columns (64 B a thread) in flight

// Generic-proxy stores to shared memory (the staging) before the tensor core
// reads them.
__device__ inline void fence_async_smem() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
#endif
}

// Staged B: the f16 pair of physical columns c, c + 1 (c = 4 i or 4 i + 2)
// of column n: physical c = 64 s + 16 q + 4 j + b is k16 step 4 s + j, core
// matrix b / 2, element 2 q + b % 2 (the A fragments below).
__device__ inline uint32_t* b_word(uint8_t* bs, int64_t c, int n) {
  const int r = static_cast<int>(c % 64), q = r / 16, j = (r % 16) / 4, b = r % 4;
  return reinterpret_cast<uint32_t*>(bs + (4 * (c / 64) + j) * kStepBytes + (b / 2) * 128 + n * 16 + 4 * q);
}

// A thread's two rows of a 64-row tile (row stride K bytes) and its stage
// loads: stage kb = columns [128 kb, 128 kb + 128), v[0], v[1] the rows' 16
// bytes of the first 64-column step, v[2], v[3] of the second.
struct TileRows {
  const uint8_t* r0;
  int64_t K;
  __device__ TileRows(const uint8_t* tile, int64_t k) : K(k) {
    const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
    r0 = tile + (16 * warp + lane / 4) * K + 16 * (lane % 4);
  }
  __device__ void load(int kb, uint4* v) const {
    const uint8_t* p = r0 + static_cast<int64_t>(kb) * kBlockCols;
    v[0] = load_weights(p);
    v[1] = load_weights(p + 8 * K);
    v[2] = load_weights(p + 64);
    v[3] = load_weights(p + 8 * K + 64);
  }
};

__device__ inline uint32_t word(const uint4& v, int i) { return i == 0 ? v.x : i == 1 ? v.y : i == 2 ? v.z : v.w; }

// d = the tile's product with B over stage kb (v as TileRows::load left it),
// summed from zero by the tensor core; the caller commits and waits. Word j
// of a row's 16 bytes of step s is k16 step 4 s + j: its bytes 0, 1 are A's
// columns 2 q, 2 q + 1 and bytes 2, 3 columns 8 + 2 q, 9 + 2 q. All 8 steps'
// fragments are converted before the fence, so that the 8 MMAs issue back to
// back (a register written between two wgmma makes ptxas fence each).
__device__ inline void mma_stage(float (&d)[4], const uint4* v, const uint8_t* bs, int kb) {
  uint32_t f[8][4];
#pragma unroll
  for (int h = 0; h < 2; ++h)
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      e4m3x4_to_f16x2x2(word(v[2 * h], j), f[4 * h + j][0], f[4 * h + j][2]);
      e4m3x4_to_f16x2x2(word(v[2 * h + 1], j), f[4 * h + j][1], f[4 * h + j][3]);
    }
  wgmma_fence();
#pragma unroll
  for (int i = 0; i < 8; ++i)
    wgmma_m64n8k16_f16(d, f[i][0], f[i][1], f[i][2], f[i][3], wgmma_desc_b(bs + (8 * kb + i) * kStepBytes, 128), i > 0);
}

// u's row (K floats, 16-byte aligned) as B's columns 0 and 1: hi + lo of
// u · 2^e (f16_split_exponent of the row's largest magnitude); columns 2..7
// zero. Returns 2^-e. All threads; raw: K floats of shared memory.
__device__ float stage_split_column(uint8_t* bs, float* raw, const float* u, int64_t K) {
  __shared__ float warp_max_of[kThreads / kWarp];
  const int lane = threadIdx.x % kWarp;
  const int64_t n4 = K / 4;
  float m = 0.0f;
  for (int64_t i = threadIdx.x; i < n4; i += kThreads) {
    const float4 v = __ldcg(reinterpret_cast<const float4*>(u) + i);
    reinterpret_cast<float4*>(raw)[i] = v;
    m = fmaxf(m, fmaxf(fmaxf(fabsf(v.x), fabsf(v.y)), fmaxf(fabsf(v.z), fabsf(v.w))));
  }
  m = warp_max(m);
  if (lane == 0) warp_max_of[threadIdx.x / kWarp] = m;
  __syncthreads();
  float tm = 0.0f;
  for (int w = 0; w < kThreads / kWarp; ++w) tm = fmaxf(tm, warp_max_of[w]);
  const int e = f16_split_exponent(tm);
  const float up = ldexpf(1.0f, e);
  for (int64_t i = threadIdx.x; i < n4; i += kThreads) {
    const float4 v = reinterpret_cast<const float4*>(raw)[i];
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      uint32_t hi, lo;
      f16_split(make_float2((half ? v.z : v.x) * up, (half ? v.w : v.y) * up), hi, lo);
      uint32_t* at = b_word(bs, 4 * i + 2 * half, 0);
      at[0] = hi;
      at[4] = lo;  // column 1: 16 bytes on
#pragma unroll
      for (int n = 2; n < 8; ++n) at[4 * n] = 0u;
    }
  }
  return ldexpf(1.0f, -e);
}

// grid (pairs, H / 64). Dynamic shared memory: B (16 I bytes: I / 16 k16
// steps of 256), u's row (4 I bytes), the tile's W2 scales (I / 128 floats).
template <int D>
__global__ void __launch_bounds__(kThreads) moe_down_wgmma_kernel(MoeArgs a, const float* u, float* y) {
  extern __shared__ __align__(128) uint8_t smem[];
  const int64_t H = a.experts.hidden, I = a.experts.intermediate;
  const int KB = static_cast<int>(I / kBlockCols), p = blockIdx.x, tile = blockIdx.y, tiles = gridDim.y;
  uint8_t* const bs = smem;
  float* const raw = reinterpret_cast<float*>(smem + 16 * I);
  float* const sw = raw + I;
  const int64_t e = __ldcg(a.expert_ids + p), t = p / a.top_k;  // the router's: see the top
  const uint8_t* const w2 = a.experts.w2 + e * a.experts.stride2;
  const TileRows m(w2 + tile * kTileRows * I, I);
  uint4 v[D][4];
#pragma unroll
  for (int d = 0; d < D; ++d)
    if (d < KB) m.load(d, v[d]);
  const float* scales = reinterpret_cast<const float*>(w2 + a.experts.scale_off2) + (tile * kTileRows / kBlockCols) * KB;
  for (int i = threadIdx.x; i < KB; i += kThreads) sw[i] = __ldg(scales + i);
  grid_dependency_wait();  // u is the up kernel's
  allow_dependents();
  const float descale = stage_split_column(bs, raw, u + p * I, I);
  fence_async_smem();
  __syncthreads();
  // Column 0 + column 1 of rows g and g + 8 (lanes q = 0 hold them).
  float acc[2] = {0.0f, 0.0f};
  for (int kb0 = 0; kb0 < KB; kb0 += D) {
#pragma unroll
    for (int d = 0; d < D; ++d) {
      const int kb = kb0 + d;
      if (kb >= KB) break;
      float part[4] = {0.0f, 0.0f, 0.0f, 0.0f};
      mma_stage(part, v[d], bs, kb);
      wgmma_commit();
      wgmma_wait<0>();
#pragma unroll
      for (int r = 0; r < 4; ++r) wgmma_hold(part[r]);
      acc[0] = fmaf(part[0] + part[1], sw[kb], acc[0]);
      acc[1] = fmaf(part[2] + part[3], sw[kb], acc[1]);
      if (kb + D < KB) m.load(kb + D, v[d]);
    }
  }
  const int64_t row0 = static_cast<int64_t>(tile) * kTileRows;
  if (threadIdx.x % 4 == 0) {
    const int64_t n = row0 + 16 * (threadIdx.x / kWarp) + (threadIdx.x % kWarp) / 4;
    y[p * H + n] = acc[0] * descale;
    y[p * H + n + 8] = acc[1] * descale;
  }
  // The last of the token's top_k blocks of this tile sums their rows.
  unsigned* const counter = a.counters + t * tiles + tile;
  if (!last_to_arrive(counter, static_cast<unsigned>(a.top_k))) return;
  if (threadIdx.x < kTileRows) {
    const int64_t n = row0 + threadIdx.x;
    float s = 0.0f;
    for (int j = 0; j < a.top_k; ++j)
      s = fmaf(__ldcg(a.weights + t * a.top_k + j), __ldcg(y + (t * a.top_k + j) * H + n), s);
    a.out[t * H + n] = s;
  }
  if (threadIdx.x == 0) *counter = 0u;  // zero again for the next launch
}

// Dynamic shared memory of a block: B (16 I bytes), u's row (4 I), W2's scales.
size_t down_smem_bytes(int64_t I) { return static_cast<size_t>(16 * I + 4 * I + (I / kBlockCols) * sizeof(float)); }

}  // namespace

int64_t moe_decode_counter_count(int64_t T, int64_t hidden) { return T * ceil_div(hidden, kTileRows); }

bool moe_decode_wgmma_supported(const MoeArgs& a) {
  const DeviceExperts& x = a.experts;
  return x.dtype == DType::kF8E4M3 && x.hidden % kBlockCols == 0 && x.intermediate % kBlockCols == 0 &&
         down_smem_bytes(x.intermediate) <= kMaxDynamicSmem && a.counters != nullptr && a.top_k >= 1 &&
         a.top_k <= kMoeMaxTopK;
}

cudaError_t launch_moe_down_wgmma(const MoeArgs& a, const float* u, float* y, cudaStream_t stream) {
  if (!moe_decode_wgmma_supported(a)) return cudaErrorInvalidValue;
  const int64_t H = a.experts.hidden, I = a.experts.intermediate, P = a.T * a.top_k;
  const size_t smem = down_smem_bytes(I);
  cudaError_t e = allow_dynamic_smem(moe_down_wgmma_kernel<kDepth>, smem);
  if (e != cudaSuccess) return e;
  return launch_pdl(moe_down_wgmma_kernel<kDepth>, dim3(static_cast<unsigned>(P), static_cast<unsigned>(H / kTileRows)),
                    kThreads, smem, stream, a, u, y);
}

}  // namespace m2::cuda
