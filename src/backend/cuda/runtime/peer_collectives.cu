// One-shot peer collectives (runtime/peer_collectives.h). Per block b of a
// collective with epoch e (this block's count of collectives, the same on
// every rank because every rank runs the same collectives in order):
//   1. copy this block's slice of `in` into region (e & 1, b) of our buffer;
//   2. publish: fence, then flag[our rank][b] = e in every peer's memory;
//   3. wait until every peer's flag[peer][b] in our memory has reached e;
//   4. read region (e & 1, b) of every rank's buffer: sum or gather.
// A peer can run at most one collective ahead (its next one waits for our
// flag), and it then writes the other parity: the region we read is not
// rewritten until we have published the epoch after it.
#include <algorithm>
#include <cstdio>

#include "backend/cuda/runtime/common.cuh"
#include "backend/cuda/gemm/fp8_quant.cuh"
#include "backend/cuda/runtime/peer_collectives.h"

namespace m2::cuda {
namespace {

constexpr int kThreads = 512;

__device__ __forceinline__ void store_release_sys(uint32_t* p, uint32_t v) {
  asm volatile("st.release.sys.global.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}

__device__ __forceinline__ uint32_t load_acquire_sys(const uint32_t* p) {
  uint32_t v;
  asm volatile("ld.acquire.sys.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}

__device__ __forceinline__ uint64_t global_ns() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// Steps 1-3 for block b (all its threads): `len` floats of `src` into the
// block's region of our buffer, our flag to every peer, every peer's flag
// awaited. Returns the region's offset in every rank's buffer.
__device__ size_t stage_and_wait(const PeerRanks& p, const float* src, int64_t len, int64_t timeout_ns) {
  const int b = blockIdx.x;
  __shared__ uint32_t epoch_s;
  if (threadIdx.x == 0) epoch_s = p.epochs[b] + 1;
  __syncthreads();
  const uint32_t e = epoch_s;
  const size_t region = (static_cast<size_t>(e & 1) * kPeerMaxBlocks + b) * kPeerRegionFloats;
  float* mine = p.buffers[p.rank] + region;
  for (int64_t i = threadIdx.x; i < len; i += blockDim.x) mine[i] = src[i];
  __syncthreads();
  if (threadIdx.x == 0) {
    __threadfence_system();  // our slice (every thread's, by the barrier) before the flags
    for (int s = 0; s < p.size; ++s)
      if (s != p.rank) store_release_sys(p.flags[s] + p.rank * kPeerMaxBlocks + b, e);
  }
  if (threadIdx.x < p.size && threadIdx.x != p.rank) {
    const int s = threadIdx.x;
    const uint32_t* flag = p.flags[p.rank] + s * kPeerMaxBlocks + b;
    const uint64_t start = global_ns();
    while (static_cast<int32_t>(load_acquire_sys(flag) - e) < 0) {
      if (global_ns() - start > static_cast<uint64_t>(timeout_ns)) {
        printf("m2cpp: peer collective: rank %d waited %lld s for rank %d (block %d, collective %u); stopping\n",
               p.rank, static_cast<long long>(timeout_ns / 1000000000), s, b, e);
        __trap();
      }
    }
  }
  __syncthreads();
  return region;
}

// Step 4's end: this block's epoch advanced (after every read of the region).
__device__ void finish(const PeerRanks& p) {
  __syncthreads();
  if (threadIdx.x == 0) p.epochs[blockIdx.x] += 1;
}

// 0 + v_0 + v_1 + ...: the in-process communicator's order.
__device__ __forceinline__ float rank_sum(const PeerRanks& p, size_t at) {
  float acc = 0.0f;
#pragma unroll 1
  for (int s = 0; s < p.size; ++s) acc += __ldcg(p.buffers[s] + at);
  return acc;
}

__global__ void __launch_bounds__(kThreads) peer_collective_kernel(PeerRanks p, const float* in, float* out,
                                                                   int64_t n, int64_t per_block, bool gather,
                                                                   int64_t out_stride, int64_t timeout_ns) {
  const int64_t begin = blockIdx.x * per_block, end = min(n, begin + per_block), len = end > begin ? end - begin : 0;
  const size_t region = stage_and_wait(p, in + begin, len, timeout_ns);
  if (!gather) {
    for (int64_t i = threadIdx.x; i < len; i += kThreads) out[begin + i] = rank_sum(p, region + i);
  } else {
    for (int s = 0; s < p.size; ++s)
      for (int64_t i = threadIdx.x; i < len; i += kThreads) out[s * out_stride + begin + i] = __ldcg(p.buffers[s] + region + i);
  }
  finish(p);
}

// The fused all-reduce + add + RMSNorm, one row per block: a row's kNormPer
// elements per thread held in registers between the sum and the scale, each
// rank's kNormPer loads issued together (one L2 round trip per rank, not per
// element: a row is a decode step's latency). The arithmetic is
// rms_norm_kernel's (elementwise.cu): x + sum rounded once, squares summed in
// fp64, out = (x * inv) * w without FMA.
constexpr int kNormThreads = 1024;
constexpr int kNormPer = static_cast<int>(kPeerFusedMaxCols / kNormThreads);

template <bool kFp8Out>
__global__ void __launch_bounds__(kNormThreads) peer_add_rms_norm_kernel(PeerRanks p, float* x, const float* y,
                                                                         int64_t n, const void* w, DType w_dtype,
                                                                         float eps, float* out, Fp8Out out8,
                                                                         int64_t timeout_ns) {
  __shared__ double scratch[kWarp];
  const int64_t t = blockIdx.x;
  const size_t region = stage_and_wait(p, y + t * n, n, timeout_ns);
  float* xr = x + t * n;
  float acc[kNormPer], v[kNormPer];
#pragma unroll
  for (int i = 0; i < kNormPer; ++i) acc[i] = 0.0f;
#pragma unroll 1
  for (int s = 0; s < p.size; ++s) {  // 0 + y_0 + y_1 + ...: rank order
    const float* src = p.buffers[s] + region;
    float got[kNormPer];
#pragma unroll
    for (int i = 0; i < kNormPer; ++i) {
      const int64_t j = threadIdx.x + i * kNormThreads;
      got[i] = j < n ? __ldcg(src + j) : 0.0f;
    }
#pragma unroll
    for (int i = 0; i < kNormPer; ++i) acc[i] += got[i];
  }
  double ss = 0;
#pragma unroll
  for (int i = 0; i < kNormPer; ++i) {
    const int64_t j = threadIdx.x + i * kNormThreads;
    if (j >= n) continue;
    v[i] = __fadd_rn(xr[j], acc[i]);
    xr[j] = v[i];
    ss += static_cast<double>(v[i]) * v[i];
  }
  const float inv = static_cast<float>(1.0 / sqrt(block_sum(ss, scratch) / static_cast<double>(n) + static_cast<double>(eps)));
  float* o = out + t * n;
#pragma unroll
  for (int i = 0; i < kNormPer; ++i) {
    const int64_t j = threadIdx.x + i * kNormThreads;
    if (j < n) o[j] = __fmul_rn(__fmul_rn(v[i], inv), load_any(w, w_dtype, j));
  }
  if constexpr (kFp8Out) {
    __syncthreads();  // the block's stores to o are visible to all its threads after this
    const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
    for (int64_t kb = warp; kb < n / kFp8Block; kb += kNormThreads / kWarp)
      quantize_store_group128(reinterpret_cast<const float4*>(o + kb * kFp8Block)[lane], t, kb, gridDim.x, n, out8.q,
                              out8.s);
  }
  finish(p);
}

}  // namespace

cudaError_t launch_peer_collective(const PeerRanks& ranks, const float* in, float* out, int64_t n, bool gather,
                                   int64_t out_stride, int timeout_s, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  if (n > kPeerLaunchFloats) return cudaErrorInvalidValue;
  // About 1K floats a block (two per thread) for the small collectives of a
  // decode step, up to every block for large ones; every rank picks the same.
  const int blocks = static_cast<int>(std::clamp<int64_t>(ceil_div(n, 1024), 1, kPeerMaxBlocks));
  const int64_t per_block = ceil_div(n, blocks);
  if (per_block > kPeerRegionFloats) return cudaErrorInvalidValue;
  peer_collective_kernel<<<blocks, kThreads, 0, stream>>>(ranks, in, out, n, per_block, gather, out_stride,
                                                          static_cast<int64_t>(timeout_s) * 1000000000);
  return cudaGetLastError();
}

cudaError_t launch_peer_add_rms_norm(const PeerRanks& ranks, float* x, const float* y, int64_t rows, int64_t n,
                                     const void* w, DType w_dtype, float eps, float* out, Fp8Out out8, int timeout_s,
                                     cudaStream_t stream) {
  if (rows <= 0) return cudaSuccess;
  if (rows > kPeerMaxBlocks || n > kPeerFusedMaxCols || n > kPeerRegionFloats || out == x) return cudaErrorInvalidValue;
  const int64_t timeout_ns = static_cast<int64_t>(timeout_s) * 1000000000;
  const unsigned blocks = static_cast<unsigned>(rows);
  if (!out8.q) {
    peer_add_rms_norm_kernel<false><<<blocks, kNormThreads, 0, stream>>>(ranks, x, y, n, w, w_dtype, eps, out, out8,
                                                                        timeout_ns);
  } else {
    if (n % kFp8Block != 0 || !out8.s || reinterpret_cast<uintptr_t>(out) % 16 != 0 ||
        reinterpret_cast<uintptr_t>(out8.q) % 4 != 0)
      return cudaErrorInvalidValue;
    peer_add_rms_norm_kernel<true><<<blocks, kNormThreads, 0, stream>>>(ranks, x, y, n, w, w_dtype, eps, out, out8,
                                                                       timeout_ns);
  }
  return cudaGetLastError();
}

}  // namespace m2::cuda
