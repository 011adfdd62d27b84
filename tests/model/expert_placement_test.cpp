// The expert placement of --cpu-moe / --n-cpu-moe at the real M2.7 shape:
// bytes per layer from the config's numbers (worked out here by hand, not
// from the code under test), the auto rule at budgets either side of a layer,
// and the refusals.
#include <gtest/gtest.h>

#include "model/expert_placement.h"
#include "model/weights.h"

namespace m2 {
namespace {

ModelConfig m27() {
  auto c = load_config_from(std::string(M2CPP_SOURCE_DIR) + "/configs/minimax-m2.7.json");
  EXPECT_TRUE(c.ok()) << c.status().message();
  return *c;
}

// One FP8 matrix [r, c] with fp32 128x128 scales, each 256-byte aligned.
int64_t fp8_matrix(int64_t r, int64_t c) {
  const int64_t scales = ((r + 127) / 128) * ((c + 127) / 128) * 4;
  return (r * c + 255) / 256 * 256 + (scales + 255) / 256 * 256;
}

TEST(ExpertPlacement, BytesOfTheRealShape) {
  const ModelConfig c = m27();
  ASSERT_EQ(c.hidden_size, 3072);
  ASSERT_EQ(c.intermediate_size, 1536);
  ASSERT_EQ(c.num_local_experts, 256);
  auto p = plan_expert_placement(c, {});
  ASSERT_TRUE(p.ok()) << p.status().message();
  // 256 experts x (w1, w3 [1536, 3072] + w2 [3072, 1536]): 3.38 GiB a layer.
  EXPECT_EQ(p->expert_bytes_per_layer, 256 * 3 * fp8_matrix(1536, 3072));
  EXPECT_EQ(p->cpu_layers, 0);
  EXPECT_EQ(p->staging_bytes, 0);
  EXPECT_EQ(p->host_bytes(), 0);
  // Embeddings and lm_head (bf16 [200064, 3072]) are most of the rest.
  EXPECT_GT(p->other_bytes, 2 * int64_t{200064} * 3072 * 2);
  EXPECT_LT(p->other_bytes, 6ll << 30);
  // 62 layers: more than one H200 holds.
  EXPECT_GT(p->device_bytes(), 141ll * 1000 * 1000 * 1000);
}

TEST(ExpertPlacement, CountAndAll) {
  const ModelConfig c = m27();
  ExpertPlacementRequest r;
  r.mode = ExpertPlacementRequest::Mode::kCount, r.count = 10;
  auto p = plan_expert_placement(c, r);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->cpu_layers, 10);
  EXPECT_EQ(p->host_bytes(), 10 * p->expert_bytes_per_layer);
  EXPECT_EQ(p->staging_bytes, 2 * p->expert_bytes_per_layer);
  EXPECT_EQ(p->device_bytes(), p->other_bytes + 54 * p->expert_bytes_per_layer);
  r.mode = ExpertPlacementRequest::Mode::kAll;
  p = plan_expert_placement(c, r);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->cpu_layers, 62);
  r.mode = ExpertPlacementRequest::Mode::kCount, r.count = 63;
  p = plan_expert_placement(c, r);
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.status().message().find("62 layers"), std::string::npos) << p.status().message();
}

TEST(ExpertPlacement, AutoFillsTheBudgetLayerByLayer) {
  const ModelConfig c = m27();
  auto base = plan_expert_placement(c, {});
  ASSERT_TRUE(base.ok());
  const int64_t per = base->expert_bytes_per_layer, other = base->other_bytes;
  ExpertPlacementRequest r;
  r.mode = ExpertPlacementRequest::Mode::kAuto;
  // Everything fits: nothing on the host, no staging.
  r.device_budget = other + 62 * per;
  auto p = plan_expert_placement(c, r);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->cpu_layers, 0);
  EXPECT_EQ(p->staging_bytes, 0);
  // One byte short: the staging buffers take two layers' room, so three
  // layers go to the host.
  r.device_budget = other + 62 * per - 1;
  p = plan_expert_placement(c, r);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->cpu_layers, 3);
  EXPECT_LE(p->device_bytes(), r.device_budget);
  // Room for exactly 30 layers besides the staging.
  r.device_budget = other + 2 * per + 30 * per;
  p = plan_expert_placement(c, r);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->cpu_layers, 32);
  EXPECT_EQ(p->device_bytes(), r.device_budget);
  r.device_budget -= 1;
  p = plan_expert_placement(c, r);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->cpu_layers, 33);
  // Not even the non-expert weights and the staging fit: refused with the GiB.
  r.device_budget = other + per;
  p = plan_expert_placement(c, r);
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.status().message().find("GiB"), std::string::npos) << p.status().message();
}

TEST(ExpertPlacement, ParsesTheFlag) {
  auto a = parse_n_cpu_moe("auto");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->mode, ExpertPlacementRequest::Mode::kAuto);
  auto n = parse_n_cpu_moe("12");
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(n->mode, ExpertPlacementRequest::Mode::kCount);
  EXPECT_EQ(n->count, 12);
  auto z = parse_n_cpu_moe("0");
  ASSERT_TRUE(z.ok());
  EXPECT_EQ(z->mode, ExpertPlacementRequest::Mode::kNone);
  for (const char* bad : {"", "-1", "x", "3x", "auto "}) {
    auto b = parse_n_cpu_moe(bad);
    EXPECT_FALSE(b.ok()) << bad;
    if (!b.ok()) EXPECT_NE(b.status().message().find("--n-cpu-moe"), std::string::npos);
  }
}

// The threads that compute host experts: --threads when given, else every
// hardware thread but one (never none).
TEST(HostExpertThreads, RequestedElseAllButOne) {
  EXPECT_EQ(host_expert_threads(6, 16), 6);
  EXPECT_EQ(host_expert_threads(0, 16), 15);
  EXPECT_EQ(host_expert_threads(0, 1), 1);
  EXPECT_EQ(host_expert_threads(-1, 2), 1);
}

}  // namespace
}  // namespace m2
