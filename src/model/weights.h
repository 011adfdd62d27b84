// The MiniMax-M2 weights as typed views, in their stored dtypes (BF16, FP8
// e4m3 + fp32 128x128 block scales, FP32 router). Views point into the
// memory-mapped checkpoint (or into owned buffers for --load-format dummy);
// nothing is converted at load time, so a checkpoint costs its own size.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "io/model_config.h"
#include "io/safetensors.h"
#include "tensor/tensor_view.h"

namespace m2 {

// y = x · Wᵀ with W [out, in]. FP8 weights carry `scale_inv`
// [ceil(out/block_rows), ceil(in/block_cols)] fp32: W = W8 × scale_inv[r/br, c/bc].
struct Linear {
  TensorView weight;
  TensorView scale_inv;  // empty unless weight is F8_E4M3
  int block_rows = 128;
  int block_cols = 128;
  void* device = nullptr;  // backend-owned copy (GPU backends); CPU uses `weight`

  int64_t out_features() const { return weight.shape[0]; }
  int64_t in_features() const { return weight.shape[1]; }
  bool is_fp8() const { return weight.dtype == DType::kF8E4M3; }
};

struct ExpertWeights {
  Linear w1;  // gate [I, H]
  Linear w3;  // up   [I, H]
  Linear w2;  // down [H, I]
};

struct LayerWeights {
  TensorView input_norm;           // [H]
  TensorView post_attention_norm;  // [H]
  Linear q_proj, k_proj, v_proj;   // [q_dim, H], [kv_dim, H], [kv_dim, H]
  Linear o_proj;                   // [H, q_dim]
  TensorView q_norm;               // [q_dim] (empty when use_qk_norm is false)
  TensorView k_norm;               // [kv_dim]
  TensorView router;               // gate [E, H], fp32 in every release
  TensorView router_bias;          // e_score_correction_bias [E] (empty when unused)
  std::vector<ExpertWeights> experts;
};

struct ModelWeights {
  ModelConfig config;
  TensorView embed;       // [V, H]
  TensorView final_norm;  // [H]
  Linear lm_head;         // [V, H]; the embedding when tie_word_embeddings
  std::vector<LayerWeights> layers;

  std::unique_ptr<Checkpoint> checkpoint;               // backing store of a real load
  std::vector<std::unique_ptr<uint8_t[]>> owned;        // backing store of a dummy load
};

// One tensor the model expects, with the dtype a fresh dummy model uses.
struct TensorSpec {
  std::string name;
  Shape shape;
  DType dtype;
  enum class Kind { kEmbedding, kNorm, kLinear, kScale, kRouter, kRouterBias } kind;
};

// Every tensor of the official checkpoint layout for `config` (spec §3.2),
// including the FP8 weight_scale_inv tensors when the config is FP8.
std::vector<TensorSpec> expected_tensors(const ModelConfig& config);

struct LoadOptions {
  enum class Format { kAuto, kSafetensors, kDummy } format = Format::kAuto;
  int num_layers = -1;   // keep only the first N layers (-1: all)
  uint64_t seed = 0;     // dummy weights
};

// `path` is a model directory (config.json + safetensors), or for dummy
// weights also a config.json file.
Result<std::unique_ptr<ModelWeights>> load_model(const std::string& path, const LoadOptions& options);

// Reads config.json from a model directory or a config file path.
Result<ModelConfig> load_config_from(const std::string& path);

// Builds deterministic random weights in the real dtypes (used by load_model).
Result<std::unique_ptr<ModelWeights>> make_dummy_weights(const ModelConfig& config, uint64_t seed);

}  // namespace m2
