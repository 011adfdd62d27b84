// How the tensor-core decode GEMV (gemv_mma.cuh) spreads a product over the
// GPU: plain C++, so the choice is unit-tested without a GPU.
#pragma once

#include <cstdint>

namespace m2::cuda {

constexpr int kMmaWarps = 16;  // warps of a block, one block of 512 threads per SM

// The work split of a launch over `blocks` blocks (one per SM): `tiles`
// items of 8 weight rows, each cut into `splits` K ranges that the warps of
// one group (splits consecutive warps of a block) compute together and sum
// in a fixed order. Tile i goes to block i % blocks (every SM gets the same
// share, +-1); a block runs its tiles kMmaWarps / splits at a time, one per
// group: round r of group q is tile (r * groups + q) * blocks + blockIdx.x.
// (Measured on an H200 against contiguous ranges per block, U = 8 steps per
// load group and L2 prefetches of each warp's next tile: none was faster,
// docs/perf.md.)
struct MmaSchedule {
  int splits = 1;
  int blocks = 1;
};

// The split count (a power of two, whole 128-column scale blocks per part,
// at most kMmaWarps) with the least time per warp, counted in 64-column
// steps: rounds x (steps per part + kRoundCost), kRoundCost standing for a
// round's pipeline refill and group barrier. A function of the shape and the
// GPU only, so a token's result does not depend on its batch.
inline MmaSchedule choose_mma_split(int64_t tiles, int64_t steps, int num_sms) {
  constexpr int64_t kRoundCost = 8;
  MmaSchedule best;
  best.blocks = static_cast<int>(tiles < num_sms ? tiles : num_sms);
  const int64_t per_block = (tiles + best.blocks - 1) / best.blocks;
  int64_t best_cost = -1;
  for (int s = 1; s <= kMmaWarps; s *= 2) {
    if ((steps / 2) % s != 0) continue;
    const int64_t rounds = (per_block + kMmaWarps / s - 1) / (kMmaWarps / s), cost = rounds * (steps / s + kRoundCost);
    if (best_cost < 0 || cost < best_cost) best_cost = cost, best.splits = s;
  }
  return best;
}

}  // namespace m2::cuda
