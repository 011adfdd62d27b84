// The bundled demo model (models/m2-demo, trained by tools/demo_model/) against
// transformers' MiniMaxM2ForCausalLM in float64 (tools/demo_model/make_reference.py):
// logits of every position of a chat-formatted prompt and the greedy answer,
// with the foundation's acceptance bound. Also checks that the bundled files
// keep the MiniMax-M2 shape features they exist to demonstrate.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

#include "io/npy.h"
#include "model/greedy.h"
#include "model/minimax_m2.h"
#include "test_paths.h"
#include "util/json.h"

namespace m2 {
namespace {

std::string demo_dir() { return std::string(M2CPP_SOURCE_DIR) + "/models/m2-demo"; }

class DemoModelTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!std::filesystem::exists(demo_dir() + "/model.safetensors"))
      GTEST_SKIP() << "models/m2-demo/model.safetensors is not there (see tools/demo_model/)";
    auto w = load_model(demo_dir(), LoadOptions{});
    ASSERT_TRUE(w.ok()) << w.status().message();
    weights_ = std::move(w.value());
    backend_ = make_cpu_backend();
    model_ = std::make_unique<MiniMaxM2>(*weights_, *backend_);
    test::Reference ref = test::load_reference("m2-demo");
    ASSERT_FALSE(HasFailure());
    prompt_ = std::move(ref.prompt);
    greedy_prompt_ = std::move(ref.greedy_prompt);
    greedy_ids_ = std::move(ref.greedy_ids);
    logits_ = std::move(ref.logits);
  }

  std::unique_ptr<ModelWeights> weights_;
  std::unique_ptr<Backend> backend_;
  std::unique_ptr<MiniMaxM2> model_;
  std::vector<int32_t> prompt_, greedy_prompt_, greedy_ids_;
  NpyArray logits_;
};

// The foundation's bound: identical argmax at every position, max |Δ| <= 5e-3.
TEST_F(DemoModelTest, LogitsOfChatPromptMatchFloat64Reference) {
  auto logits = all_logits(*model_, prompt_, DType::kF32);
  ASSERT_TRUE(logits.ok()) << logits.status().message();
  const int64_t V = model_->config().vocab_size;
  ASSERT_EQ(logits_.shape, (std::vector<int64_t>{static_cast<int64_t>(prompt_.size()), V}));
  double max_diff = 0;
  for (size_t t = 0; t < prompt_.size(); ++t) {
    const float* ours = logits->data() + t * V;
    const double* want = logits_.values.data() + t * V;
    int64_t a = 0, b = 0;
    for (int64_t v = 0; v < V; ++v) {
      max_diff = std::max(max_diff, std::abs(ours[v] - want[v]));
      if (ours[v] > ours[a]) a = v;
      if (want[v] > want[b]) b = v;
    }
    EXPECT_EQ(a, b) << "argmax differs at position " << t;
  }
  EXPECT_LE(max_diff, 5e-3);
  RecordProperty("max_abs_diff", std::to_string(max_diff));
  std::printf("m2-demo: max |logit - reference| = %.3g over %zu positions\n", max_diff, prompt_.size());
}

// The answer transformers gives greedily (through the KV cache here).
TEST_F(DemoModelTest, GreedyAnswerReproducesReferenceIds) {
  GreedyOptions o;
  o.max_tokens = static_cast<int>(greedy_ids_.size());
  o.ignore_eos = true;
  auto ids = generate_greedy(*model_, greedy_prompt_, o);
  ASSERT_TRUE(ids.ok()) << ids.status().message();
  EXPECT_EQ(*ids, greedy_ids_);
}

// What the demo model exists to show: the MiniMax-M2 features, in the
// official dtypes, with a trained (non-zero) routing correction bias.
TEST_F(DemoModelTest, KeepsTheMiniMaxM2FeaturesAndSize) {
  const ModelConfig& c = weights_->config;
  EXPECT_GE(c.num_hidden_layers, 4);
  EXPECT_GE(c.num_local_experts, 8);
  EXPECT_GE(c.num_experts_per_tok, 2);
  EXPECT_LT(c.rotary_dim, c.head_dim);  // partial rotary
  EXPECT_TRUE(c.use_qk_norm);
  EXPECT_TRUE(c.use_routing_bias);
  EXPECT_EQ(c.vocab_size % 64, 0);
  EXPECT_EQ(weights_->embed.dtype, DType::kBF16);
  for (const LayerWeights& layer : weights_->layers) {
    EXPECT_EQ(layer.router.dtype, DType::kF32);
    ASSERT_EQ(layer.router_bias.dtype, DType::kF32);
    EXPECT_EQ(layer.q_norm.shape.numel(), c.q_dim());  // full-width QK norm
    EXPECT_EQ(layer.experts[0].w1.weight.dtype, DType::kBF16);
    double bias_abs = 0;
    for (int64_t e = 0; e < layer.router_bias.shape.numel(); ++e)
      bias_abs += std::abs(tensor_get_f32(layer.router_bias, e));
    EXPECT_GT(bias_abs, 0.0) << "correction bias was not trained";
  }
  uintmax_t bytes = 0;
  for (const auto& f : std::filesystem::directory_iterator(demo_dir()))
    if (f.is_regular_file()) bytes += f.file_size();
  EXPECT_LE(bytes, 32u << 20) << "models/m2-demo must stay small enough to commit";
}

}  // namespace
}  // namespace m2
