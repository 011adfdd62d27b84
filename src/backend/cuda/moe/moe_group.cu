// Grouping of (token, expert) pairs by expert (moe_group.h), all on the GPU.
//
// Up to kGroupOneBlockPairs pairs (decode batches): one block of
// kGroupThreads counts the pairs of each expert with shared-memory atomics,
// turns the counts into offsets and tiles by block-wide prefix sums (thread
// i holds experts [4i, 4i + 4): one thread walking the E experts with a
// 64-bit division each took 29 us at E = 256 on an H200, Nsight Compute,
// batch 64), then places every pair. More pairs (prefill): that one block
// took 70 us a layer at an 8K prefill (65,536 pairs; timeline), so up to
// kSpreadCounts / E blocks of kSpreadThreads take contiguous ranges of at
// least kSpreadPairs pairs each:
//   1. each block counts its range's experts -> counts[b][e];
//   2. one block sums them per expert, makes the offsets and tiles as above,
//      and each block's first row per expert, in place: counts[b][e] =
//      offset_e + Σ_{b' < b} counts[b'][e];
//   3. each block places its range's pairs from there.
#include <algorithm>

#include <cub/block/block_scan.cuh>

#include "backend/cuda/runtime/common.cuh"
#include "backend/cuda/moe/moe_group.h"

namespace m2::cuda {
namespace {

constexpr int kGroupThreads = 1024, kGroupPerThread = 4;
static_assert(kGroupThreads * kGroupPerThread == kMoeGroupMaxExperts, "one scan covers every expert");
constexpr int kIdLoads = 8;
constexpr int64_t kGroupOneBlockPairs = 16384;
constexpr int kSpreadThreads = 256;
constexpr int64_t kSpreadPairs = 2048;  // the fewest pairs a block of the many-pairs path takes
constexpr int kSpreadCounts = 16384;    // blocks x experts: the offsets kernel holds them in shared memory

// The blocks of the many-pairs path; block b takes pairs [b chunk, (b + 1) chunk).
int spread_blocks(int64_t P, int E) {
  return static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(ceil_div(P, kSpreadPairs), kSpreadCounts / E)));
}

// f(ids[p], p) for the pairs p = first + threadIdx.x + i * blockDim.x < end,
// kIdLoads loads issued before the calls that use them (a load per atomic
// made each walk one memory round trip per blockDim.x pairs).
template <class F>
__device__ inline void for_ids(const int32_t* __restrict__ ids, int64_t first, int64_t end, F f) {
  for (int64_t p0 = first + threadIdx.x; p0 < end; p0 += int64_t{kIdLoads} * blockDim.x) {
    int32_t e[kIdLoads];
#pragma unroll
    for (int i = 0; i < kIdLoads; ++i) {
      const int64_t p = p0 + int64_t{i} * blockDim.x;
      e[i] = p < end ? __ldg(ids + p) : -1;
    }
#pragma unroll
    for (int i = 0; i < kIdLoads; ++i)
      if (e[i] >= 0) f(e[i], p0 + int64_t{i} * blockDim.x);
  }
}

// counts[e] (shared, [E]) = the pairs of expert e among [first, end), by the
// whole block. Ends synchronised.
__device__ inline void count_experts(const int32_t* ids, int64_t first, int64_t end, int E, int* counts) {
  for (int e = threadIdx.x; e < E; e += blockDim.x) counts[e] = 0;
  __syncthreads();
  for_ids(ids, first, end, [&](int32_t e, int64_t) { atomicAdd(&counts[e], 1); });
  __syncthreads();
}

// Block-wide (kGroupThreads): from the experts' pair counts (shared, [E]),
// their offsets (shared [E]; a.first too when asked), every tile and
// *a.num_tiles. Ends synchronised.
__device__ void offsets_and_tiles(const MoeGroupArgs& a, const int* counts, int* offset, int* first_tile) {
  const int E = a.E, tile_pairs = a.tile_pairs;
  using Scan = cub::BlockScan<int, kGroupThreads>;
  __shared__ typename Scan::TempStorage scan;
  int c[kGroupPerThread], t[kGroupPerThread], oc[kGroupPerThread], ot[kGroupPerThread];
#pragma unroll
  for (int j = 0; j < kGroupPerThread; ++j) {
    const int e = threadIdx.x * kGroupPerThread + j;
    c[j] = e < E ? counts[e] : 0;
    t[j] = (c[j] + tile_pairs - 1) / tile_pairs;
  }
  int total_tiles = 0;
  Scan(scan).ExclusiveSum(c, oc);
  __syncthreads();  // the scan's storage is reused
  Scan(scan).ExclusiveSum(t, ot, total_tiles);
#pragma unroll
  for (int j = 0; j < kGroupPerThread; ++j) {
    const int e = threadIdx.x * kGroupPerThread + j;
    if (e < E) offset[e] = oc[j], first_tile[e] = ot[j];
    if (e < E && a.first) a.first[e] = oc[j];
  }
  if (threadIdx.x == 0) {
    *a.num_tiles = total_tiles;
    if (a.first) a.first[E] = static_cast<int32_t>(a.P);
  }
  __syncthreads();
  for (int e = threadIdx.x; e < E; e += blockDim.x)
    for (int i = 0; i * tile_pairs < counts[e]; ++i)
      a.tiles[first_tile[e] + i] = make_int4(e, offset[e] + i * tile_pairs, min(tile_pairs, counts[e] - i * tile_pairs), 0);
  __syncthreads();
}

// Places the pairs [first, end): the next row of expert e is cursor[e].
__device__ inline void place(const MoeGroupArgs& a, int64_t first, int64_t end, int* cursor) {
  for_ids(a.ids, first, end, [&](int32_t e, int64_t p) {
    const int r = atomicAdd(&cursor[e], 1);
    a.sorted[r] = static_cast<int32_t>(p);
    if (a.row_of_pair) a.row_of_pair[p] = r;
  });
}

// Shared memory [3 E] ints: counts (then cursors), offsets, first tiles.
__global__ void __launch_bounds__(kGroupThreads) moe_group_kernel(MoeGroupArgs a) {
  extern __shared__ int counts[];
  int* offset = counts + a.E;
  int* first_tile = counts + 2 * a.E;
  count_experts(a.ids, 0, a.P, a.E, counts);
  offsets_and_tiles(a, counts, offset, first_tile);
  for (int e = threadIdx.x; e < a.E; e += blockDim.x) counts[e] = offset[e];
  __syncthreads();
  place(a, 0, a.P, counts);
}

// 1. Block b's counts of the pairs [b chunk, (b + 1) chunk). Shared memory
// [E] ints.
__global__ void __launch_bounds__(kSpreadThreads) moe_count_kernel(MoeGroupArgs a, int* block_counts, int64_t chunk) {
  extern __shared__ int counts[];
  const int64_t first = blockIdx.x * chunk;
  count_experts(a.ids, first, min(a.P, first + chunk), a.E, counts);
  for (int e = threadIdx.x; e < a.E; e += blockDim.x) block_counts[int64_t{blockIdx.x} * a.E + e] = counts[e];
}

// 2. One block of kGroupThreads: the totals, offsets and tiles, then each
// block's first rows in place of its counts. Shared memory [3 E] ints, then
// the [blocks, E] counts (read at once, coalesced).
__global__ void __launch_bounds__(kGroupThreads) moe_offsets_kernel(MoeGroupArgs a, int* block_counts, int blocks) {
  extern __shared__ int counts[];
  int* offset = counts + a.E;
  int* first_tile = counts + 2 * a.E;
  int* by_block = counts + 3 * a.E;
  const int n = blocks * a.E;
  for (int i = threadIdx.x; i < n; i += blockDim.x) by_block[i] = block_counts[i];
  __syncthreads();
  for (int e = threadIdx.x; e < a.E; e += blockDim.x) {
    int c = 0;
    for (int b = 0; b < blocks; ++b) c += by_block[b * a.E + e];
    counts[e] = c;
  }
  __syncthreads();
  offsets_and_tiles(a, counts, offset, first_tile);
  for (int e = threadIdx.x; e < a.E; e += blockDim.x) {
    int row = offset[e];
    for (int b = 0; b < blocks; ++b) {
      const int c = by_block[b * a.E + e];
      by_block[b * a.E + e] = row;
      row += c;
    }
  }
  __syncthreads();
  for (int i = threadIdx.x; i < n; i += blockDim.x) block_counts[i] = by_block[i];
}

// 3. Block b places its pairs from its first rows. Shared memory [E] ints.
__global__ void __launch_bounds__(kSpreadThreads) moe_place_kernel(MoeGroupArgs a, const int* block_rows,
                                                                   int64_t chunk) {
  extern __shared__ int cursor[];
  for (int e = threadIdx.x; e < a.E; e += blockDim.x) cursor[e] = block_rows[int64_t{blockIdx.x} * a.E + e];
  __syncthreads();
  const int64_t first = blockIdx.x * chunk;
  place(a, first, min(a.P, first + chunk), cursor);
}

}  // namespace

int64_t moe_group_max_tiles(int64_t pairs, int64_t E, int tile_pairs) {
  return ceil_div(pairs, tile_pairs) + std::min(E, pairs);
}

size_t moe_group_scratch_bytes(int64_t pairs, int64_t E) {
  return pairs > kGroupOneBlockPairs ? sizeof(int) * static_cast<size_t>(spread_blocks(pairs, static_cast<int>(E)) * E)
                                     : 0;
}

cudaError_t launch_moe_group(const MoeGroupArgs& a, cudaStream_t stream) {
  if (a.E <= 0 || a.E > kMoeGroupMaxExperts || a.P <= 0 || a.P > INT32_MAX || a.tile_pairs <= 0)
    return cudaErrorInvalidValue;
  const size_t smem3 = 3 * sizeof(int) * a.E;
  cudaError_t e = cudaSuccess;
  if (a.P <= kGroupOneBlockPairs) {
    if ((e = allow_dynamic_smem(moe_group_kernel, smem3)) != cudaSuccess) return e;
    moe_group_kernel<<<1, kGroupThreads, smem3, stream>>>(a);
    return cudaGetLastError();
  }
  if (!a.scratch) return cudaErrorInvalidValue;
  int* block_counts = static_cast<int*>(a.scratch);
  const int blocks = spread_blocks(a.P, a.E);
  const int64_t chunk = ceil_div(a.P, blocks);
  const size_t smem_offsets = smem3 + sizeof(int) * blocks * a.E;
  if ((e = allow_dynamic_smem(moe_offsets_kernel, smem_offsets)) != cudaSuccess) return e;
  moe_count_kernel<<<blocks, kSpreadThreads, sizeof(int) * a.E, stream>>>(a, block_counts, chunk);
  moe_offsets_kernel<<<1, kGroupThreads, smem_offsets, stream>>>(a, block_counts, blocks);
  moe_place_kernel<<<blocks, kSpreadThreads, sizeof(int) * a.E, stream>>>(a, block_counts, chunk);
  return cudaGetLastError();
}

}  // namespace m2::cuda
