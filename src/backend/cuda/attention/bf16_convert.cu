// bf16 copies for kernels that read or write bf16 (FlashInfer's prefill
// attention, flashinfer_prefill.h): of fp32 activations, back to fp32, and of
// FP8 cache pages with their scales. Memory-bound; a thread moves 4 values.
#include <cuda_bf16.h>
#include <cuda_fp8.h>

#include <algorithm>

#include "backend/cuda/runtime/common.cuh"
#include "backend/cuda/gemm/fp8_quant.cuh"
#include "backend/cuda/attention/bf16_convert.h"

namespace m2::cuda {
namespace {

constexpr int kThreads = 256;

// y[4i..4i+3] = bf16(x[4i..4i+3]) with RNE.
__global__ void __launch_bounds__(kThreads) f32_to_bf16_kernel(const float4* __restrict__ x, int64_t n4,
                                                                uint2* __restrict__ y) {
  grid_dependency_wait();
  allow_dependents();
  for (int64_t i = blockIdx.x * int64_t{kThreads} + threadIdx.x; i < n4; i += int64_t{gridDim.x} * kThreads) {
    const float4 v = x[i];
    const __nv_bfloat162 lo = __floats2bfloat162_rn(v.x, v.y), hi = __floats2bfloat162_rn(v.z, v.w);
    y[i] = make_uint2(*reinterpret_cast<const uint32_t*>(&lo), *reinterpret_cast<const uint32_t*>(&hi));
  }
}

// One warp per 128-column group of a row: lane l converts columns 4l..4l+3
// (exact: every bf16 is an fp32) and, with out8.q, quantises the group as
// every FP8 producer does (fp8_quant.cuh).
__global__ void __launch_bounds__(kThreads) bf16_to_f32_kernel(const uint2* __restrict__ o, int64_t T, int64_t cols,
                                                                float4* __restrict__ out, Fp8Out out8) {
  grid_dependency_wait();
  allow_dependents();
  const int64_t groups = cols / kFp8Block, lane = threadIdx.x % kWarp;
  const int64_t warps = int64_t{gridDim.x} * (kThreads / kWarp);
  for (int64_t g = blockIdx.x * int64_t{kThreads / kWarp} + threadIdx.x / kWarp; g < T * groups; g += warps) {
    const int64_t t = g / groups, kb = g % groups, i = (t * cols + kb * kFp8Block) / 4 + lane;
    const uint2 b = o[i];
    const float2 lo = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&b.x));
    const float2 hi = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&b.y));
    const float4 v = make_float4(lo.x, lo.y, hi.x, hi.y);
    out[i] = v;
    if (out8.q) quantize_store_group128(v, t, kb, T, cols, out8.q, out8.s);
  }
}

// One warp per cached row (page p of `pages`, slot j, kv head h): lane l
// decodes codes 4l..4l+3 times the row's scale, rounded to bf16 (RNE).
__global__ void __launch_bounds__(kThreads) fp8_pages_to_bf16_kernel(const uint32_t* __restrict__ cache,
                                                                      const float* __restrict__ scales,
                                                                      const int32_t* __restrict__ pages, int64_t rows,
                                                                      int page_rows, uint2* __restrict__ out) {
  grid_dependency_wait();
  allow_dependents();
  constexpr int kRowWords = kFp8Block / 4;  // a head_dim-128 row: 32 words of 4 codes
  const int64_t warps = int64_t{gridDim.x} * (kThreads / kWarp), lane = threadIdx.x % kWarp;
  for (int64_t r = blockIdx.x * int64_t{kThreads / kWarp} + threadIdx.x / kWarp; r < rows; r += warps) {
    const int64_t src = int64_t{pages[r / page_rows]} * page_rows + r % page_rows;  // (slot, head) row of the cache
    const float sc = scales[src];
    const uint32_t w = cache[src * kRowWords + lane];
    const float4 v = static_cast<float4>(*reinterpret_cast<const __nv_fp8x4_e4m3*>(&w));
    const __nv_bfloat162 lo = __floats2bfloat162_rn(v.x * sc, v.y * sc), hi = __floats2bfloat162_rn(v.z * sc, v.w * sc);
    out[r * kRowWords + lane] =
        make_uint2(*reinterpret_cast<const uint32_t*>(&lo), *reinterpret_cast<const uint32_t*>(&hi));
  }
}

unsigned blocks_for(int64_t items, int64_t per_block) {
  return static_cast<unsigned>(std::max<int64_t>(1, std::min<int64_t>(ceil_div(items, per_block), 8 * 1024)));
}

}  // namespace

cudaError_t launch_f32_to_bf16(const float* x, int64_t n, void* y, cudaStream_t stream) {
  if (n % 4 != 0 || reinterpret_cast<uintptr_t>(x) % 16 != 0 || reinterpret_cast<uintptr_t>(y) % 8 != 0)
    return cudaErrorInvalidValue;
  if (n == 0) return cudaSuccess;
  return launch_pdl(f32_to_bf16_kernel, blocks_for(n / 4, kThreads), kThreads, 0, stream,
                    reinterpret_cast<const float4*>(x), n / 4, static_cast<uint2*>(y));
}

cudaError_t launch_bf16_to_f32(const void* o, int64_t T, int64_t cols, float* out, Fp8Out out8, cudaStream_t stream) {
  if (cols % kFp8Block != 0 || reinterpret_cast<uintptr_t>(o) % 8 != 0 || reinterpret_cast<uintptr_t>(out) % 16 != 0)
    return cudaErrorInvalidValue;
  if (T == 0) return cudaSuccess;
  return launch_pdl(bf16_to_f32_kernel, blocks_for(T * (cols / kFp8Block), kThreads / kWarp), kThreads, 0, stream,
                    static_cast<const uint2*>(o), T, cols, reinterpret_cast<float4*>(out), out8);
}

cudaError_t launch_fp8_pages_to_bf16(const uint8_t* cache, const float* scales, const int32_t* pages, int64_t n_pages,
                                     int block_size, int kv_heads, int head_dim, void* out, cudaStream_t stream) {
  if (head_dim != kFp8Block || block_size < 1 || kv_heads < 1 || reinterpret_cast<uintptr_t>(cache) % 4 != 0 ||
      reinterpret_cast<uintptr_t>(out) % 8 != 0)
    return cudaErrorInvalidValue;
  const int page_rows = block_size * kv_heads;
  const int64_t rows = n_pages * page_rows;
  if (rows == 0) return cudaSuccess;
  return launch_pdl(fp8_pages_to_bf16_kernel, blocks_for(rows, kThreads / kWarp), kThreads, 0, stream,
                    reinterpret_cast<const uint32_t*>(cache), scales, pages, rows, page_rows, static_cast<uint2*>(out));
}

}  // namespace m2::cuda
