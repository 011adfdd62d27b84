// The work plan of FlashInfer's persistent prefill kernel
// (plan_flashinfer_prefill, flashinfer_prefill.h): a host rule, so this runs
// without a GPU. Every (sequence, head, query tile) exactly once, with its
// sequence's rows, keys and pages; CTAs balanced to within one item.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <tuple>

#include "backend/cuda/attention/flashinfer_prefill.h"

namespace m2::test {
namespace {

using cuda::FlashInferPlan;
using cuda::FlashInferSeq;
constexpr int kTile = cuda::kFlashInferTileRows;

int64_t item_cost(const FlashInferSeq& s, int tile) {
  return 2 * kTile + std::min<int64_t>(s.context_len, int64_t{s.context_len} - s.rows + int64_t{tile + 1} * kTile);
}

void expect_plan(const std::vector<FlashInferSeq>& seqs, int heads, int ctas) {
  SCOPED_TRACE(::testing::Message() << seqs.size() << " sequences, " << heads << " heads, " << ctas << " CTAs");
  const FlashInferPlan p = cuda::plan_flashinfer_prefill(seqs, heads, ctas);
  for (int64_t off : {p.qo_tile, p.qo_start, p.kv_page_start, p.qo_len, p.kv_len, p.head, p.work_indptr, p.batch})
    EXPECT_EQ(off % 4, 0) << "sections start 16-byte aligned";
  ASSERT_EQ(p.ctas, ctas);
  const int32_t* w = p.packed.data() + p.work_indptr;
  EXPECT_EQ(w[0], 0);
  EXPECT_EQ(w[ctas], p.items);
  std::map<std::tuple<int, int, int>, int> seen;  // (seq, head, tile) -> count
  std::vector<int64_t> cost(static_cast<size_t>(ctas), 0);
  int64_t max_item = 0;
  for (int c = 0; c < ctas; ++c) {
    ASSERT_LE(w[c], w[c + 1]);
    for (int32_t i = w[c]; i < w[c + 1]; ++i) {
      const int s = p.packed[p.batch + i], h = p.packed[p.head + i], t = p.packed[p.qo_tile + i];
      ASSERT_GE(s, 0);
      ASSERT_LT(s, static_cast<int>(seqs.size()));
      ASSERT_GE(h, 0);
      ASSERT_LT(h, heads);
      ASSERT_GE(t, 0);
      ASSERT_LT(t * kTile, seqs[s].rows);
      EXPECT_EQ(p.packed[p.qo_start + i], seqs[s].first_row);
      EXPECT_EQ(p.packed[p.qo_len + i], seqs[s].rows);
      EXPECT_EQ(p.packed[p.kv_len + i], seqs[s].context_len);
      EXPECT_EQ(p.packed[p.kv_page_start + i], seqs[s].page_offset);
      ++seen[{s, h, t}];
      cost[static_cast<size_t>(c)] += item_cost(seqs[s], t);
      max_item = std::max(max_item, item_cost(seqs[s], t));
    }
  }
  int64_t items = 0;
  for (size_t s = 0; s < seqs.size(); ++s) items += heads * ((seqs[s].rows + kTile - 1) / kTile);
  EXPECT_EQ(p.items, items);
  EXPECT_EQ(static_cast<int64_t>(seen.size()), items);
  for (const auto& [key, n] : seen) EXPECT_EQ(n, 1);
  // Greedy least-loaded assignment: no CTA ends more than one item above another.
  const auto [lo, hi] = std::minmax_element(cost.begin(), cost.end());
  if (items >= ctas) {
    EXPECT_LE(*hi - *lo, max_item);
  }
}

TEST(FlashInferPlan, OneLongPrefill) { expect_plan({{0, 8192, 8192, 0}}, 48, 132); }

TEST(FlashInferPlan, ChunksOfLongContextsAndShortPrompts) {
  // A 2K chunk at the end of a 10K context, a 16-row prompt, a 300-row one
  // (partial last tile) between rows of other sequences (decode rows at 2316).
  expect_plan({{0, 2048, 10240, 0}, {2048, 16, 16, 640}, {2064, 300, 300, 641}, {2365, 129, 4000, 660}}, 48, 132);
}

TEST(FlashInferPlan, FewerItemsThanCtas) { expect_plan({{0, 100, 100, 0}}, 2, 132); }

}  // namespace
}  // namespace m2::test
