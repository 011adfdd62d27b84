// Loading checkpoints: every expected tensor present with the right shape and
// dtype, FP8 weights with their scales, nothing unexpected (MTP layers and
// layers cut by --num-layers are skipped); dummy weights at any shape.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "../io/st_writer.h"
#include "model/backend.h"
#include "model/dummy_values.h"
#include "model/weights.h"

namespace m2 {
namespace {

const char* kConfig = R"({"model_type": "minimax_m2", "vocab_size": 64, "hidden_size": 32,
  "intermediate_size": 16, "num_hidden_layers": 2, "num_attention_heads": 2, "num_key_value_heads": 1,
  "head_dim": 24, "num_local_experts": 3, "num_experts_per_tok": 2, "rotary_dim": 12,
  "use_qk_norm": true, "qk_norm_type": "per_layer", "use_routing_bias": true, "scoring_func": "sigmoid",
  "torch_dtype": "bfloat16",
  "quantization_config": {"quant_method": "fp8", "fmt": "float8_e4m3fn", "activation_scheme": "dynamic",
    "weight_block_size": [128, 128], "modules_to_not_convert": ["gate", "e_score_correction_bias", "lm_head"]}})";

using Tensors = std::map<std::string, test::StTensor>;

Tensors full_checkpoint(const ModelConfig& c) {
  Tensors t;
  for (const TensorSpec& s : expected_tensors(c)) {
    std::vector<int64_t> shape(s.shape.dims.begin(), s.shape.dims.begin() + s.shape.ndim);
    t[s.name] = test::st_zeros(std::string(dtype_name(s.dtype)), shape);
  }
  return t;
}

class LoaderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = test::temp_dir("loader");
    std::ofstream(dir_ + "/config.json") << kConfig;
    auto c = load_model_config(dir_ + "/config.json");
    ASSERT_TRUE(c.ok()) << c.status().message();
    config_ = *c;
  }
  Status load(const Tensors& t, int num_layers = -1) {
    std::filesystem::remove(dir_ + "/model.safetensors");
    test::st_write(dir_ + "/model.safetensors", t);
    LoadOptions o;
    o.num_layers = num_layers;
    return load_model(dir_, o).status();
  }
  void expect_error(const Tensors& t, const std::string& needle) {
    Status s = load(t);
    ASSERT_FALSE(s.ok()) << needle;
    EXPECT_NE(s.message().find(needle), std::string::npos) << s.message();
  }
  std::string dir_;
  ModelConfig config_;
};

TEST_F(LoaderTest, OfficialLayoutLoads) {
  Tensors t = full_checkpoint(config_);
  EXPECT_EQ(t.count("model.layers.1.block_sparse_moe.experts.2.w3.weight_scale_inv"), 1u);
  EXPECT_EQ(t.at("model.layers.0.block_sparse_moe.gate.weight").dtype, "F32");
  ASSERT_TRUE(load(t).ok()) << load(t).message();
}

TEST_F(LoaderTest, MissingTensor) {
  Tensors t = full_checkpoint(config_);
  t.erase("model.layers.1.self_attn.k_norm.weight");
  expect_error(t, "missing tensor 'model.layers.1.self_attn.k_norm.weight'");
}

TEST_F(LoaderTest, WrongShape) {
  Tensors t = full_checkpoint(config_);
  t["model.layers.0.self_attn.q_proj.weight"] = test::st_zeros("F8_E4M3", {47, 32});
  expect_error(t, "shape [47, 32] but the config implies [48, 32]");
}

TEST_F(LoaderTest, Fp8WithoutScale) {
  Tensors t = full_checkpoint(config_);
  t.erase("model.layers.0.block_sparse_moe.experts.1.w2.weight_scale_inv");
  expect_error(t, "without its 'model.layers.0.block_sparse_moe.experts.1.w2.weight_scale_inv'");
}

TEST_F(LoaderTest, ScaleOfWrongShape) {
  Tensors t = full_checkpoint(config_);
  t["model.layers.0.self_attn.o_proj.weight_scale_inv"] = test::st_zeros("F32", {2, 1});
  expect_error(t, "need F32 [1, 1]");
}

TEST_F(LoaderTest, IntegerWeightRefused) {
  Tensors t = full_checkpoint(config_);
  t["model.norm.weight"] = test::st_zeros("I32", {32});
  expect_error(t, "dtype I32 is not supported");
}

TEST_F(LoaderTest, UnexpectedTensor) {
  Tensors t = full_checkpoint(config_);
  t["model.layers.0.mlp.shared_expert.weight"] = test::st_zeros("BF16", {4});
  expect_error(t, "unexpected tensor 'model.layers.0.mlp.shared_expert.weight'");
}

TEST_F(LoaderTest, ScaleOnUnquantizedWeight) {
  Tensors t = full_checkpoint(config_);
  t["model.layers.0.self_attn.q_proj.weight"] = test::st_zeros("BF16", {48, 32});
  expect_error(t, "rather than F8_E4M3");
}

TEST_F(LoaderTest, MtpLayersAreSkipped) {
  Tensors t = full_checkpoint(config_);
  t["model.layers.2.enorm.weight"] = test::st_zeros("BF16", {32});  // layer num_hidden_layers = MTP module 0
  t["model.layers.3.self_attn.q_proj.weight"] = test::st_zeros("BF16", {48, 32});
  EXPECT_TRUE(load(t).ok()) << load(t).message();
}

TEST_F(LoaderTest, NumLayersCutsTheRest) {
  Tensors t = full_checkpoint(config_);
  EXPECT_TRUE(load(t, 1).ok());
  EXPECT_FALSE(load(t, 5).ok());
}

TEST(DummyWeights, RealShapeOfOneLayerInRealDtypes) {
  auto c = load_model_config(std::string(M2CPP_SOURCE_DIR) + "/configs/minimax-m2.7.json");
  ASSERT_TRUE(c.ok());
  c->num_hidden_layers = 1;
  c->num_local_experts = 16;  // keep the test small; shapes per expert are real
  c->vocab_size = 4096;
  auto w = make_dummy_weights(*c, 7);
  ASSERT_TRUE(w.ok()) << w.status().message();
  const LayerWeights& L = (*w)->layers[0];
  EXPECT_EQ(L.q_proj.weight.dtype, DType::kF8E4M3);
  EXPECT_EQ(L.q_proj.weight.shape, (Shape{6144, 3072}));
  EXPECT_EQ(L.q_proj.scale_inv.shape, (Shape{48, 24}));
  EXPECT_EQ(L.experts[15].w2.scale_inv.shape, (Shape{24, 12}));
  EXPECT_EQ(L.router.dtype, DType::kF32);
  EXPECT_EQ((*w)->lm_head.weight.dtype, DType::kBF16);
  EXPECT_EQ((*w)->embed.shape, (Shape{4096, 3072}));
  // Deterministic: the same seed gives the same bytes.
  auto w2 = make_dummy_weights(*c, 7);
  ASSERT_TRUE(w2.ok());
  EXPECT_EQ(0, std::memcmp(L.experts[3].w1.weight.data, (*w2)->layers[0].experts[3].w1.weight.data, 1536 * 3072));
}

// For a GPU backend the FP8 weights are placeholders the backend fills from
// model/dummy_values.h: its element-by-element values are the host fill's
// bytes (a real-shape layer: tensors of 4.7 M elements, 5 fill chunks), the
// other tensors are filled as before, and the CPU backend refuses them.
TEST(DummyWeights, Fp8ValuesByIndexAreTheHostFill) {
  auto c = load_model_config(std::string(M2CPP_SOURCE_DIR) + "/configs/minimax-m2.7.json");
  ASSERT_TRUE(c.ok());
  c->num_hidden_layers = 1;
  c->num_local_experts = 4;
  c->vocab_size = 4096;
  auto host = make_dummy_weights(*c, 11);
  auto dev = make_dummy_weights(*c, 11, /*fp8_on_device=*/true);
  ASSERT_TRUE(host.ok() && dev.ok());
  const LayerWeights& H = (*host)->layers[0];
  const LayerWeights& D = (*dev)->layers[0];
  const DummyFp8Table table = dummy_fp8_table();
  const std::pair<const Linear*, const Linear*> pairs[] = {
      {&H.q_proj, &D.q_proj}, {&H.o_proj, &D.o_proj}, {&H.experts[2].w1, &D.experts[2].w1},
      {&H.experts[3].w2, &D.experts[3].w2}};
  for (auto [h, d] : pairs) {
    auto it = (*dev)->dummy_fp8.find(d->weight.data);
    ASSERT_NE(it, (*dev)->dummy_fp8.end());
    ASSERT_EQ(it->second.elements, h->weight.shape.numel());
    const auto* want = static_cast<const uint8_t*>(h->weight.data);
    int64_t wrong = 0;
    for (int64_t i = 0; i < it->second.elements; ++i) wrong += table.code[dummy_fp8_index(it->second.seed, i)] != want[i];
    EXPECT_EQ(wrong, 0) << h->weight.shape.str();
    // Scales and every non-FP8 tensor are host data as before.
    EXPECT_EQ(0, std::memcmp(h->scale_inv.data, d->scale_inv.data, h->scale_inv.nbytes()));
  }
  EXPECT_EQ((*dev)->dummy_fp8.size(), 4u + 3u * 4u);  // q, k, v, o and the experts' w1, w3, w2
  EXPECT_EQ(0, std::memcmp(H.router.data, D.router.data, H.router.nbytes()));
  auto cpu = make_cpu_backend();
  const Status st = cpu->prepare_weights(**dev);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("GPU"), std::string::npos) << st.message();
  EXPECT_TRUE(cpu->prepare_weights(**host).ok());
}

}  // namespace
}  // namespace m2
