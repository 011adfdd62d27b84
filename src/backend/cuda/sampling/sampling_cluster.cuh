// The cross-block pieces of the sampling kernel (sampling.cu), where a row is
// held by a cluster of kCluster blocks of kThreads threads: block and
// cluster reductions, a block scan, and the radix select over the rank key.
// Every block reduces the same partials in the same order, so all of them
// take the same decisions and results are deterministic. Clusters and
// distributed shared memory need sm_90: only the constants are compiled for
// older architectures. Included by sampling.cu only.
#pragma once

#include <cooperative_groups.h>

#include <cstdint>

#include "backend/cuda/runtime/common.cuh"
#include "model/sampling_math.h"

namespace m2::cuda::sampling {

constexpr int kCluster = 8;    // blocks per row (the portable cluster size)
constexpr int kThreads = 512;  // 2 blocks per SM fit in registers and shared memory
constexpr int kWarps = kThreads / kWarp;

// The radix select's digits: one histogram bucket per thread.
constexpr int kDigitBits = 9;
constexpr int kBuckets = 1 << kDigitBits;
static_assert(kBuckets == kThreads, "the scan gives each thread one bucket");
constexpr int kKeyBits = 32 + kSampleIdBits;

// Clusters and distributed shared memory exist from sm_90: code built for
// older GPUs has none of the functions below (sampling.cu's kernel traps
// there, and the backend samples on the host: device_caps.h).
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 900

namespace cg = cooperative_groups;
using u64 = unsigned long long;

// Keys of drawable logits (not -inf, not NaN) are at least this.
constexpr uint64_t kValidKeyFloor = static_cast<uint64_t>(kNegInfOrderKey + 1) << kSampleIdBits;

struct Best {  // a draw candidate: larger key wins, lower id on ties
  double key;
  int32_t id;
};

struct MaxOp {
  template <class T>
  __device__ T operator()(T a, T b) const { return a > b ? a : b; }
};
struct SumOp {
  template <class T>
  __device__ T operator()(T a, T b) const { return a + b; }
};
struct FMaxOp {  // ignores NaN
  __device__ float operator()(float a, float b) const { return fmaxf(a, b); }
};
struct BestOp {
  __device__ Best operator()(Best a, Best b) const {
    return (b.key > a.key || (b.key == a.key && b.id < a.id)) ? b : a;
  }
};

template <class T>
__device__ T shfl_xor(T v, int o) { return __shfl_xor_sync(0xffffffffu, v, o); }
template <>
__device__ inline Best shfl_xor(Best v, int o) {
  return Best{__shfl_xor_sync(0xffffffffu, v.key, o), __shfl_xor_sync(0xffffffffu, v.id, o)};
}

// op over the block; every thread gets the result.
template <class T, class Op>
__device__ T block_reduce(T v, Op op, T identity) {
  __shared__ T scratch[kWarps];
  const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp;
#pragma unroll
  for (int o = kWarp / 2; o > 0; o /= 2) v = op(v, shfl_xor(v, o));
  __syncthreads();  // a previous call may still read scratch
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  v = lane < kWarps ? scratch[lane] : identity;
#pragma unroll
  for (int o = kWarp / 2; o > 0; o /= 2) v = op(v, shfl_xor(v, o));
  return v;
}

// op over the whole cluster (each thread's `v`); every thread of every block
// gets the same result (the blocks' partials reduced in rank order).
template <class T, class Op>
__device__ T cluster_reduce(cg::cluster_group& cluster, T v, Op op, T identity) {
  __shared__ T slot;
  v = block_reduce(v, op, identity);
  if (threadIdx.x == 0) slot = v;
  cluster.sync();
  T r = *cluster.map_shared_rank(&slot, 0);
  for (unsigned k = 1; k < kCluster; ++k) r = op(r, *cluster.map_shared_rank(&slot, k));
  cluster.sync();  // every block has read the slots before they are reused
  return r;
}

// Inclusive prefix sum over the block in thread order.
__device__ inline u64 block_inclusive_scan(u64 v) {
  __shared__ u64 warp_total[kWarps];
  const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp;
#pragma unroll
  for (int o = 1; o < kWarp; o *= 2) {
    const u64 y = __shfl_up_sync(0xffffffffu, v, o);
    if (lane >= o) v += y;
  }
  if (lane == kWarp - 1) warp_total[warp] = v;
  __syncthreads();
  if (warp == 0) {
    u64 t = lane < kWarps ? warp_total[lane] : 0;
#pragma unroll
    for (int o = 1; o < kWarp; o *= 2) {
      const u64 y = __shfl_up_sync(0xffffffffu, t, o);
      if (lane >= o) t += y;
    }
    if (lane < kWarps) warp_total[lane] = t;
  }
  __syncthreads();
  if (warp > 0) v += warp_total[warp - 1];
  __syncthreads();  // warp_total is reused by the next call
  return v;
}

// exp((v - max) / T) in (0, 1] as a 2^-40 fixed-point integer: integer sums
// of these are exact and independent of the order of addition.
__device__ inline u64 mass_fixed(float v, float max_v, float inv_t) {
  return static_cast<u64>(expf((v - max_v) * inv_t) * 0x1p40f);
}

// The fixed-point mass top-p must reach out of `total`: ceil(top_p * total),
// at least 1.
__device__ inline u64 nucleus_want(float top_p, u64 total) {
  const double target = ceil(static_cast<double>(top_p) * static_cast<double>(total));
  return target < 1.0 ? 1 : static_cast<u64>(target);
}

// Radix select over this cluster's row (`vals` [n], this block's share from
// id `lo`): among the elements with key >= `floor`, the threshold T such
// that the elements with key >= T are
//  - kMass false: exactly `want` of them (fewer in the domain: all);
//  - kMass true: the shortest rank-order prefix whose fixed-point mass
//    reaches `want`.
// Callers keep key >= max(T, floor). 9-bit digits of the 50-bit rank key; a
// select stops as soon as the crossing bucket holds one element or is taken
// whole. h_count/h_mass: this block's histogram (kBuckets each).
template <bool kMass>
__device__ uint64_t cluster_select(cg::cluster_group& cluster, const float* vals, int n, int lo, uint64_t floor,
                                   u64 want, float max_v, float inv_t, uint32_t* h_count, u64* h_mass) {
  __shared__ int found;
  __shared__ uint32_t sel_bucket;
  __shared__ u64 sel_before, sel_count, sel_weight;
  const int lane = threadIdx.x % kWarp;
  uint64_t prefix = 0, fixed = 0;
  u64 r = want;
  for (int hi = kKeyBits; hi > 0; hi -= kDigitBits) {
    const int shift = hi > kDigitBits ? hi - kDigitBits : 0;
    const uint64_t digit_mask = (uint64_t{1} << (hi - shift)) - 1;
    h_count[threadIdx.x] = 0;
    if (kMass) h_mass[threadIdx.x] = 0;
    if (threadIdx.x == 0) found = 0;
    __syncthreads();
    // Warp-aggregated histogram: lanes with the same digit add once.
    for (int base = 0; base < n; base += kThreads) {
      const int i = base + static_cast<int>(threadIdx.x);
      bool take = false;
      uint32_t d = 0xffffffffu;
      u64 w = 0;
      if (i < n) {
        const uint64_t key = sample_rank_key(vals[i], lo + i);
        if (key >= floor && (key & fixed) == prefix) {
          take = true;
          d = static_cast<uint32_t>((key >> shift) & digit_mask);
          if (kMass) w = mass_fixed(vals[i], max_v, inv_t);
        }
      }
      const unsigned peers = __match_any_sync(0xffffffffu, d);
      const bool leader = __ffs(peers) - 1 == lane;
      if (kMass) {
        // Halves of <= 2^20 each: a group's sums fit in 32 bits.
        const unsigned low = __reduce_add_sync(peers, static_cast<unsigned>(w & 0xfffffu));
        const unsigned high = __reduce_add_sync(peers, static_cast<unsigned>(w >> 20));
        if (take && leader) atomicAdd(&h_mass[d], (static_cast<u64>(high) << 20) + low);
      }
      if (take && leader) atomicAdd(&h_count[d], static_cast<uint32_t>(__popc(peers)));
    }
    cluster.sync();  // every block's histogram is complete
    // Thread t owns bucket kBuckets - 1 - t: thread order is rank order.
    const int b = kBuckets - 1 - static_cast<int>(threadIdx.x);
    u64 count = 0, mass = 0;
    for (unsigned k = 0; k < kCluster; ++k) {
      count += cluster.map_shared_rank(h_count, k)[b];
      if (kMass) mass += cluster.map_shared_rank(h_mass, k)[b];
    }
    const u64 weight = kMass ? mass : count;
    const u64 incl = block_inclusive_scan(weight);
    if (incl - weight < r && incl >= r) {  // the crossing bucket (exactly one thread when the total reaches r)
      found = 1;
      sel_bucket = static_cast<uint32_t>(b);
      sel_before = incl - weight;
      sel_count = count;
      sel_weight = weight;
    }
    cluster.sync();  // every block has read the histograms (and sees sel_*)
    const bool hit = found != 0;
    const uint64_t bucket = sel_bucket;
    const u64 before = sel_before, in_bucket = sel_count, bucket_weight = sel_weight;
    __syncthreads();  // all have read found and sel_* before the next pass resets them
    if (!hit) return floor;
    prefix |= bucket << shift;
    fixed |= digit_mask << shift;
    r -= before;
    if (in_bucket == 1 || r == bucket_weight) return prefix;  // the bucket is taken whole
  }
  return prefix;
}

#endif

}  // namespace m2::cuda::sampling
