// config.json -> typed ModelConfig for the MiniMaxM2ForCausalLM family.
// Accepts the released spellings (`rotary_dim`, `rope_theta`, `torch_dtype`)
// and the transformers-v5 ones (`rope_parameters`, `dtype`). Anything the
// engine does not implement (another qk_norm_type, linear-attention layers,
// softmax scoring, shared experts, ...) is refused with a message naming the
// field, never silently ignored.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "tensor/dtype.h"
#include "util/json.h"
#include "util/status.h"

namespace m2 {

struct Fp8Quantization {
  int block_rows = 128;  // weight_block_size[0]: output rows per scale
  int block_cols = 128;  // weight_block_size[1]: input columns per scale
  std::vector<std::string> modules_to_not_convert;
};

struct ModelConfig {
  std::string model_type = "minimax_m2";
  int vocab_size = 0;
  int hidden_size = 0;           // H
  int intermediate_size = 0;     // per-expert FFN width I
  int num_hidden_layers = 0;
  int num_attention_heads = 0;   // q heads
  int num_key_value_heads = 0;
  int head_dim = 0;
  int rotary_dim = 0;            // leading dims of each head that rotate
  double rope_theta = 10000.0;
  int max_position_embeddings = 0;
  double rms_norm_eps = 1e-6;
  bool use_qk_norm = true;       // full-width ("per_layer") q/k RMSNorm
  int num_local_experts = 0;     // E
  int num_experts_per_tok = 0;   // top-k
  bool use_routing_bias = true;  // e_score_correction_bias, selection only
  double routed_scaling_factor = 1.0;
  bool tie_word_embeddings = false;
  DType dtype = DType::kBF16;    // storage dtype of unquantized tensors
  std::optional<Fp8Quantization> fp8;  // FP8 e4m3 block-scaled linear weights
  int num_mtp_modules = 0;       // declared, never released: ignored
  std::optional<int> bos_token_id, eos_token_id;

  int q_dim() const { return num_attention_heads * head_dim; }
  int kv_dim() const { return num_key_value_heads * head_dim; }
  int gqa_group() const { return num_attention_heads / num_key_value_heads; }

  // Whether a linear module (e.g. "q_proj", "w1", "lm_head", "gate") is stored
  // in FP8 under this config's quantization_config.
  bool is_fp8_module(const std::string& module_name) const;
};

// `source` names the document in error messages (usually the file path).
Result<ModelConfig> parse_model_config(const Json& j, const std::string& source);
Result<ModelConfig> load_model_config(const std::string& path);

}  // namespace m2
