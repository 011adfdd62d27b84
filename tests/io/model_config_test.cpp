#include "io/model_config.h"

#include <gtest/gtest.h>

namespace m2 {
namespace {

std::string source_dir() { return M2CPP_SOURCE_DIR; }

TEST(ModelConfig, ReleasedM27) {
  auto c = load_model_config(source_dir() + "/configs/minimax-m2.7.json");
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->num_hidden_layers, 62);
  EXPECT_EQ(c->hidden_size, 3072);
  EXPECT_EQ(c->q_dim(), 6144);
  EXPECT_EQ(c->kv_dim(), 1024);
  EXPECT_EQ(c->rotary_dim, 64);
  EXPECT_EQ(c->rope_theta, 5e6);
  EXPECT_EQ(c->num_local_experts, 256);
  EXPECT_EQ(c->num_experts_per_tok, 8);
  EXPECT_EQ(c->intermediate_size, 1536);
  EXPECT_EQ(c->max_position_embeddings, 204800);
  EXPECT_EQ(c->dtype, DType::kBF16);
  ASSERT_TRUE(c->fp8.has_value());
  EXPECT_EQ(c->fp8->block_rows, 128);
  EXPECT_TRUE(c->is_fp8_module("w1"));
  EXPECT_FALSE(c->is_fp8_module("gate"));
  EXPECT_FALSE(c->is_fp8_module("lm_head"));
  EXPECT_EQ(c->num_mtp_modules, 3);
  EXPECT_FALSE(c->tie_word_embeddings);
}

TEST(ModelConfig, ReleasedM25SpellsTorchDtype) {
  auto c = load_model_config(source_dir() + "/configs/minimax-m2.5.json");
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->max_position_embeddings, 196608);
  EXPECT_EQ(c->dtype, DType::kBF16);
}

Json minimal() {
  return Json::parse(R"({"model_type": "minimax_m2", "vocab_size": 100, "hidden_size": 64,
    "intermediate_size": 32, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
    "head_dim": 32, "num_local_experts": 4, "num_experts_per_tok": 2, "rotary_dim": 16})");
}

TEST(ModelConfig, TransformersV5Spellings) {
  Json j = minimal();
  j.erase("rotary_dim");
  j["rope_parameters"] = {{"rope_theta", 123456.0}, {"rope_type", "default"}, {"partial_rotary_factor", 0.25}};
  j["dtype"] = "float16";
  auto c = parse_model_config(j, "v5.json");
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->rotary_dim, 8);
  EXPECT_EQ(c->rope_theta, 123456.0);
  EXPECT_EQ(c->dtype, DType::kF16);
}

TEST(ModelConfig, RefusesWhatTheEngineDoesNotImplement) {
  struct Case {
    const char* field;
    Json value;
    const char* needle;
  };
  const std::vector<Case> cases = {
      {"qk_norm_type", "per_head", "qk_norm_type 'per_head' is not supported"},
      {"scoring_func", "softmax", "scoring_func 'softmax'"},
      {"attn_type_list", Json::array({1, 0}), "attn_type_list[1]"},
      {"shared_intermediate_size", 512, "shared experts"},
      {"hidden_act", "gelu", "hidden_act 'gelu'"},
      {"sliding_window", 4096, "sliding_window"},
      {"rope_scaling", Json{{"type", "yarn"}}, "rope_scaling"},
      {"n_group", 4, "group-limited"},
      {"attention_bias", true, "attention_bias"},
      {"quantization_config", Json{{"quant_method", "awq"}}, "quant_method 'awq'"},
      {"quantization_config", Json{{"quant_method", "fp8"}, {"activation_scheme", "static"},
                                   {"weight_block_size", {128, 128}}}, "activation_scheme 'static'"},
      {"quantization_config", Json{{"quant_method", "fp8"}}, "weight_block_size"},
      {"model_type", "llama", "not minimax_m2"},
      {"hidden_size", "3072", "expected an integer"},
      {"num_experts_per_tok", 9, "num_experts_per_tok 9"},
      {"rotary_dim", 33, "rotary dimension 33"},
      {"num_attention_heads", 3, "not a multiple"},
      {"layer_types", Json::array({"full_attention", "linear_attention"}), "layer_types[1]"},
      {"dtype", "int8", "dtype 'int8'"},
  };
  for (const Case& c : cases) {
    Json j = minimal();
    j[c.field] = c.value;
    auto r = parse_model_config(j, "bad.json");
    ASSERT_FALSE(r.ok()) << c.field;
    EXPECT_NE(r.status().message().find(c.needle), std::string::npos) << r.status().message();
    EXPECT_EQ(r.status().message().rfind("bad.json", 0), 0u) << "must name the file: " << r.status().message();
  }
  Json j = minimal();
  j.erase("vocab_size");
  auto r = parse_model_config(j, "bad.json");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("missing required field 'vocab_size'"), std::string::npos);
}

TEST(ModelConfig, MtpDeclaredButIgnored) {
  Json j = minimal();
  j["use_mtp"] = true;
  j["num_mtp_modules"] = 3;
  j["mtp_transformer_layers"] = 1;
  auto c = parse_model_config(j, "mtp.json");
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->num_hidden_layers, 2);
}

}  // namespace
}  // namespace m2
