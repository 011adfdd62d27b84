#include "engine/block_manager.h"

#include <gtest/gtest.h>

#include <numeric>

namespace m2 {
namespace {

Sequence make_seq(std::vector<int32_t> tokens) {
  Sequence s;
  s.tokens = std::move(tokens);
  s.num_prompt_tokens = static_cast<int64_t>(s.tokens.size());
  return s;
}

std::vector<int32_t> iota_tokens(int n, int start = 0) {
  std::vector<int32_t> t(n);
  std::iota(t.begin(), t.end(), start);
  return t;
}

// Allocates and "computes" the whole sequence, registering its full blocks.
void compute_all(BlockManager& bm, Sequence& s) {
  bm.attach_cached_prefix(s);
  ASSERT_TRUE(bm.ensure_capacity(s, s.num_tokens()));
  s.num_computed = s.num_tokens();
  bm.commit_full_blocks(s);
}

TEST(BlockManager, AllocatesAndReleases) {
  BlockManager bm(10, 4, false);
  Sequence s = make_seq(iota_tokens(9));
  EXPECT_EQ(bm.blocks_needed(s, 9), 3);
  ASSERT_TRUE(bm.ensure_capacity(s, 9));
  EXPECT_EQ(s.block_table.size(), 3u);
  EXPECT_EQ(bm.num_free_blocks(), 7);
  EXPECT_EQ(bm.slot(s, 5), static_cast<int64_t>(s.block_table[1]) * 4 + 1);
  EXPECT_TRUE(bm.ensure_capacity(s, 12));  // still 3 blocks
  EXPECT_EQ(bm.num_free_blocks(), 7);
  Sequence big = make_seq(iota_tokens(40));
  EXPECT_FALSE(bm.ensure_capacity(big, 40));  // needs 10, 7 free: nothing taken
  EXPECT_TRUE(big.block_table.empty());
  EXPECT_EQ(bm.num_free_blocks(), 7);
  bm.release(s);
  EXPECT_EQ(bm.num_free_blocks(), 10);
}

TEST(BlockManager, PrefixHitsWholeBlocksAndLeavesOneTokenToCompute) {
  BlockManager bm(16, 4, true);
  Sequence a = make_seq(iota_tokens(10));  // blocks [0..3][4..7] full, [8,9] partial
  compute_all(bm, a);
  bm.release(a);

  Sequence b = make_seq(iota_tokens(13));  // same first 10 tokens, then 3 more
  bm.attach_cached_prefix(b);
  EXPECT_EQ(b.num_computed, 8);  // two full blocks; the partial block was never cached
  EXPECT_EQ(b.block_table.size(), 2u);

  Sequence c = make_seq(iota_tokens(8));  // exactly the two cached blocks
  bm.attach_cached_prefix(c);
  EXPECT_EQ(c.num_computed, 4);  // the last token must be computed: only the first block
  bm.count_lookup(b);
  EXPECT_EQ(bm.stats().queried_tokens, 13);
  EXPECT_EQ(bm.stats().hit_tokens, 8);
}

TEST(BlockManager, HashIsChainedOverThePrefix) {
  BlockManager bm(16, 4, true);
  Sequence a = make_seq({1, 2, 3, 4, 5, 6, 7, 8, 9});
  compute_all(bm, a);
  bm.release(a);
  // Same second block after a different first block: no hit at all.
  Sequence b = make_seq({9, 9, 9, 9, 5, 6, 7, 8, 9});
  bm.attach_cached_prefix(b);
  EXPECT_EQ(b.num_computed, 0);
}

TEST(BlockManager, SharedBlocksAreReferenceCounted) {
  BlockManager bm(8, 4, true);
  Sequence a = make_seq(iota_tokens(9));
  compute_all(bm, a);  // 3 blocks, 2 cached full
  Sequence b = make_seq(iota_tokens(9));
  bm.attach_cached_prefix(b);  // shares a's two full blocks while a still runs
  EXPECT_EQ(b.block_table[0], a.block_table[0]);
  EXPECT_EQ(b.block_table[1], a.block_table[1]);
  ASSERT_TRUE(bm.ensure_capacity(b, 9));
  EXPECT_EQ(bm.num_free_blocks(), 8 - 4);  // 3 for a + 1 private for b
  bm.release(a);
  EXPECT_EQ(bm.num_free_blocks(), 8 - 3);  // b still holds the shared two and its own
  bm.release(b);
  EXPECT_EQ(bm.num_free_blocks(), 8);
}

TEST(BlockManager, EvictsLeastRecentlyReleasedUnderPressureAndReusesAfterEviction) {
  BlockManager bm(4, 2, true);
  Sequence a = make_seq({1, 2, 3, 4, 5});  // blocks {1,2} {3,4} cached, {5} private
  compute_all(bm, a);
  bm.release(a);
  EXPECT_EQ(bm.num_free_blocks(), 4);
  // A new sequence needing all 4 blocks forces evictions of the cached ones.
  Sequence b = make_seq({7, 7, 7, 7, 7, 7, 7, 7});
  ASSERT_TRUE(bm.ensure_capacity(b, 8));
  EXPECT_EQ(bm.stats().evictions, 2);
  b.num_computed = 8;
  bm.commit_full_blocks(b);
  bm.release(b);
  // a's prefix is gone: a new lookup misses and computes from scratch...
  Sequence a2 = make_seq({1, 2, 3, 4, 5});
  bm.attach_cached_prefix(a2);
  EXPECT_EQ(a2.num_computed, 0);
  compute_all(bm, a2);
  bm.release(a2);
  // ...and once recomputed it is cached again.
  Sequence a3 = make_seq({1, 2, 3, 4, 5});
  bm.attach_cached_prefix(a3);
  EXPECT_EQ(a3.num_computed, 4);
}

TEST(BlockManager, EvictionOrderIsLeastRecentlyReleasedFirst) {
  BlockManager bm(4, 2, true);
  Sequence a = make_seq({1, 2, 9});
  compute_all(bm, a);
  Sequence b = make_seq({3, 4, 9});
  compute_all(bm, b);
  bm.release(a);  // a's cached block is older
  bm.release(b);
  Sequence c = make_seq({5, 6, 7, 8, 9, 9});
  ASSERT_TRUE(bm.ensure_capacity(c, 3 * 2));  // 2 free + 1 eviction
  EXPECT_EQ(bm.stats().evictions, 1);
  Sequence b2 = make_seq({3, 4, 9});
  bm.attach_cached_prefix(b2);
  EXPECT_EQ(b2.num_computed, 2);  // b's block survived
  Sequence a2 = make_seq({1, 2, 9});
  bm.attach_cached_prefix(a2);
  EXPECT_EQ(a2.num_computed, 0);  // a's was evicted
}

}  // namespace
}  // namespace m2

namespace m2 {
namespace {

// flush_prefix_cache (SGLang's flush_cache, and every weight update): no
// later lookup hits a block cached before; unreferenced cached blocks become
// free, blocks in use stay with their sequences; an uncacheable sequence
// (routing replay, or running across a flush) never enters the cache.
TEST(BlockManager, FlushForgetsEveryCachedBlock) {
  BlockManager bm(8, 4, true);
  Sequence a = make_seq(iota_tokens(9));
  compute_all(bm, a);
  bm.release(a);                       // 2 cached, unreferenced
  Sequence b = make_seq(iota_tokens(8, 100));
  compute_all(bm, b);                  // 2 cached, in use
  EXPECT_EQ(bm.num_free_blocks(), 6);  // free + cached-unused
  EXPECT_EQ(bm.flush_prefix_cache(), 4);
  EXPECT_EQ(bm.num_free_blocks(), 6);  // b keeps its blocks
  Sequence again = make_seq(iota_tokens(9));
  bm.attach_cached_prefix(again);
  EXPECT_EQ(again.num_computed, 0);
  Sequence b2 = make_seq(iota_tokens(8, 100));
  bm.attach_cached_prefix(b2);
  EXPECT_EQ(b2.num_computed, 0);  // b's blocks were forgotten too
  bm.release(b);
  EXPECT_EQ(bm.num_free_blocks(), 8);
  EXPECT_EQ(bm.flush_prefix_cache(), 0);

  Sequence u = make_seq(iota_tokens(9, 50));
  u.cacheable = false;
  compute_all(bm, u);
  bm.release(u);
  Sequence v = make_seq(iota_tokens(9, 50));
  bm.attach_cached_prefix(v);
  EXPECT_EQ(v.num_computed, 0);
}

}  // namespace
}  // namespace m2
