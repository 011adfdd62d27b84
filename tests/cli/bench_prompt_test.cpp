// bench decode's prefill tokens (cli/bench_prompt.h): the warm-up pass is
// drawn like the timed context (uniform ids, not one id repeated), from its
// own stream, and the timed tokens are those the benchmark always timed.
#include "cli/bench_prompt.h"

#include <gtest/gtest.h>

#include <set>

namespace m2::cli {
namespace {

constexpr int kVocab = 200064;  // the M2 vocabulary

TEST(BenchPrompt, WarmupIsDrawnLikeTheTimedContext) {
  const BenchPrompt p = bench_prompt(1000, 256, kVocab);
  ASSERT_EQ(p.warmup.size(), 256u);  // one prefill chunk
  ASSERT_EQ(p.context.size(), 1000u);
  for (int32_t t : p.warmup) ASSERT_TRUE(t >= 0 && t < kVocab) << t;
  for (int32_t t : p.context) ASSERT_TRUE(t >= 0 && t < kVocab) << t;
  // 256 uniform draws of 200,064 ids: ~0.16 repeats expected, so all but a
  // few are distinct, in the warm-up as in the first timed chunk (a repeated
  // id, as the old warm-up's 256 zeros, routes every token alike).
  const std::set<int32_t> warm(p.warmup.begin(), p.warmup.end());
  const std::set<int32_t> first(p.context.begin(), p.context.begin() + 256);
  EXPECT_GE(warm.size(), 250u);
  EXPECT_GE(first.size(), 250u);
  // Its own draws: the warm-up does not run the first timed chunk ahead.
  EXPECT_NE(p.warmup, std::vector<int32_t>(p.context.begin(), p.context.begin() + 256));
}

TEST(BenchPrompt, TimedTokensAreTheBenchmarksOwnSeedOneDraws) {
  std::mt19937 rng(1);
  const BenchPrompt p = bench_prompt(300, 128, kVocab);
  for (int32_t t : p.context) ASSERT_EQ(t, static_cast<int32_t>(rng() % kVocab));
  EXPECT_EQ(p.warmup.size(), 128u);
  EXPECT_TRUE(bench_prompt(100, 256, kVocab).warmup.size() == 100u);  // a context shorter than a chunk
  EXPECT_TRUE(bench_prompt(0, 256, kVocab).warmup.empty());
}

}  // namespace
}  // namespace m2::cli
