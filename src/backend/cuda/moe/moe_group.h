// Pairs (token, expert) grouped by expert on the GPU, for moe.cu's grouped
// paths: sorted[r] = the pair at sorted row r, expert e's pairs at rows
// [offset_e, offset_e + count_e) (offsets in expert order; the order inside
// an expert is arbitrary, and no result depends on it), cut into tiles
// {expert, first row, count, 0} of at most tile_pairs pairs in expert order,
// and optionally first[e] = offset_e (first[E] = P) and row_of_pair[p] = the
// row of pair p.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace m2::cuda {

constexpr int kMoeGroupMaxExperts = 4096;

// The most tiles a grouping of `pairs` pairs over E experts makes.
int64_t moe_group_max_tiles(int64_t pairs, int64_t E, int tile_pairs);
// Scratch bytes launch_moe_group needs beside its outputs (per-block counts
// of the many-pairs path).
size_t moe_group_scratch_bytes(int64_t pairs, int64_t E);

struct MoeGroupArgs {
  const int32_t* ids = nullptr;  // [P] expert of pair p
  int64_t P = 0;
  int E = 0;  // <= kMoeGroupMaxExperts
  int tile_pairs = 0;
  int32_t* sorted = nullptr;       // [P]
  int4* tiles = nullptr;           // [moe_group_max_tiles]
  int* num_tiles = nullptr;        // [1]
  int32_t* first = nullptr;        // [E + 1], or null: not written
  int32_t* row_of_pair = nullptr;  // [P], or null: not written
  void* scratch = nullptr;         // moe_group_scratch_bytes
};
cudaError_t launch_moe_group(const MoeGroupArgs& a, cudaStream_t stream);

}  // namespace m2::cuda
