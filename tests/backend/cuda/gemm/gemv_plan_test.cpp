// The tensor-core decode GEMV's work split (backend/cuda/gemm/gemv_mma_plan.h):
// pure host decisions, so these run without a GPU.
#include <gtest/gtest.h>

#include <vector>

#include "backend/cuda/gemm/gemv_mma_plan.h"

namespace m2::test {
namespace {

using cuda::choose_mma_split;
using cuda::kMmaWarps;
using cuda::MmaSchedule;

constexpr int kH200Sms = 132;

// The splits the H200 measurements were taken with (docs/perf.md, fourth
// pass): q|k|v [8192, 3072] two K halves in one round, o_proj [3072, 6144]
// four K quarters in one round (16 warps over 3 rounds was 20 % slower).
TEST(GemvPlan, M2ShapesOnAnH200) {
  const MmaSchedule qkv = choose_mma_split(8192 / 8, 3072 / 64, kH200Sms);
  EXPECT_EQ(qkv.splits, 2);
  EXPECT_EQ(qkv.blocks, kH200Sms);
  const MmaSchedule o = choose_mma_split(3072 / 8, 6144 / 64, kH200Sms);
  EXPECT_EQ(o.splits, 4);
  EXPECT_EQ(o.blocks, kH200Sms);
  EXPECT_EQ(choose_mma_split(1024 / 8, 3072 / 64, kH200Sms).blocks, 128);  // k_proj: fewer tiles than SMs
}

// Every schedule covers every tile exactly once (mma_tile_of's round robin,
// replayed here) and gives each part whole 128-column scale blocks.
TEST(GemvPlan, EveryTileOnceAndWholeScaleBlocks) {
  for (int sms : {1, 7, 108, 132}) {
    for (int64_t tiles : {1, 5, 96, 128, 384, 1024, 25008}) {
      for (int64_t steps : {2, 6, 24, 48, 96, 112}) {
        const MmaSchedule s = choose_mma_split(tiles, steps, sms);
        ASSERT_GE(s.splits, 1);
        ASSERT_LE(s.splits, kMmaWarps);
        ASSERT_EQ(kMmaWarps % s.splits, 0);
        ASSERT_EQ((steps / 2) % s.splits, 0) << "a part would cut a scale block";
        ASSERT_GE(s.blocks, 1);
        ASSERT_LE(s.blocks, sms);
        ASSERT_LE(s.blocks, tiles);
        const int groups = kMmaWarps / s.splits;
        std::vector<int> seen(tiles, 0);
        for (int b = 0; b < s.blocks; ++b)
          for (int q = 0; q < groups; ++q)
            for (int64_t r = 0;; ++r) {
              const int64_t tile = (r * groups + q) * s.blocks + b;
              if (tile >= tiles) break;
              ++seen[tile];
            }
        for (int64_t t = 0; t < tiles; ++t)
          ASSERT_EQ(seen[t], 1) << "tile " << t << " of " << tiles << ", " << sms << " SMs, " << steps << " steps";
      }
    }
  }
}

}  // namespace
}  // namespace m2::test
