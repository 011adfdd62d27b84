// --gpu-memory-utilization's arithmetic (engine/memory_budget.*).
#include "engine/memory_budget.h"

#include <gtest/gtest.h>

#include <vector>

namespace m2 {
namespace {

constexpr int64_t kGiB = 1ll << 30;

TEST(MemoryBudget, KvCacheGetsWhatTheFractionLeaves) {
  auto kv = kv_cache_budget(0.9, 140 * kGiB, 100 * kGiB, 6 * kGiB);
  ASSERT_TRUE(kv.ok()) << kv.status().message();
  EXPECT_EQ(*kv, static_cast<int64_t>(0.9 * 140 * kGiB) - 106 * kGiB);
}

TEST(MemoryBudget, WeightsAboveTheBudgetAreAnErrorInGiB) {
  auto kv = kv_cache_budget(0.5, 140 * kGiB, 100 * kGiB, 0);
  ASSERT_FALSE(kv.ok());
  EXPECT_NE(kv.status().message().find("the weights take 100.00 GiB"), std::string::npos) << kv.status().message();
  EXPECT_NE(kv.status().message().find("70.00 GiB"), std::string::npos) << kv.status().message();
}

TEST(MemoryBudget, NoRoomLeftForTheCacheIsAnError) {
  auto kv = kv_cache_budget(0.75, 140 * kGiB, 100 * kGiB, 5 * kGiB);
  ASSERT_FALSE(kv.ok());
  EXPECT_NE(kv.status().message().find("leaves no KV cache"), std::string::npos) << kv.status().message();
}

TEST(MemoryBudget, UtilizationMustBeAFraction) {
  for (double u : {0.0, -0.1, 1.5}) EXPECT_FALSE(kv_cache_budget(u, kGiB, 0, 0).ok()) << u;
  EXPECT_TRUE(kv_cache_budget(1.0, 2 * kGiB, 0, kGiB).ok());
}

// Tensor parallelism: ranks on their own GPUs each get their device's
// leftover, the least of them; ranks sharing a GPU share its budget.
TEST(MemoryBudget, RanksGetTheLeastDevicesShareAndRanksOnOneDeviceShareIt) {
  const std::vector<RankMemory> own = {{0, 140 * kGiB, 60 * kGiB}, {1, 140 * kGiB, 62 * kGiB}};
  auto kv = kv_cache_budget_per_rank(0.9, own, 4 * kGiB);
  ASSERT_TRUE(kv.ok()) << kv.status().message();
  EXPECT_EQ(*kv, static_cast<int64_t>(0.9 * 140 * kGiB) - 66 * kGiB);  // GPU 1's, the smaller
  const std::vector<RankMemory> shared = {{0, 140 * kGiB, 30 * kGiB}, {0, 140 * kGiB, 30 * kGiB}};
  auto half = kv_cache_budget_per_rank(0.9, shared, 4 * kGiB);
  ASSERT_TRUE(half.ok()) << half.status().message();
  EXPECT_EQ(*half, (static_cast<int64_t>(0.9 * 140 * kGiB) - 68 * kGiB) / 2);
  // The device that cannot hold its ranks is named.
  const std::vector<RankMemory> full = {{0, 140 * kGiB, 60 * kGiB}, {3, 140 * kGiB, 130 * kGiB}};
  auto none = kv_cache_budget_per_rank(0.9, full, 4 * kGiB);
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.status().message().find("GPU 3 (1 rank of the group)"), std::string::npos) << none.status().message();
  EXPECT_NE(none.status().message().find("the weights take 130.00 GiB"), std::string::npos) << none.status().message();
  EXPECT_FALSE(kv_cache_budget_per_rank(0.9, {}, 0).ok());
}

TEST(MemoryBudget, ActivationReserveGrowsWithTokensAndRows) {
  ModelConfig c;
  c.hidden_size = 3072, c.num_attention_heads = 48, c.num_key_value_heads = 8, c.head_dim = 128;
  c.intermediate_size = 1536, c.num_local_experts = 256, c.num_experts_per_tok = 8, c.vocab_size = 200064;
  const int64_t base = activation_reserve_bytes(c, 0, 0);
  EXPECT_EQ(base, kGiB);
  // 2048 tokens: (3*3072 + 2*6144 + 2*1024 + 256 + 8*(3*1536 + 3072)) floats each.
  EXPECT_EQ(activation_reserve_bytes(c, 2048, 0) - base, 2048ll * (9216 + 12288 + 2048 + 256 + 8 * 7680) * 4);
  EXPECT_EQ(activation_reserve_bytes(c, 0, 256) - base, 2ll * 256 * 200064 * 4);
}

}  // namespace
}  // namespace m2
