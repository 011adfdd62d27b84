#include "model/weights.h"

#include <filesystem>
#include <map>
#include <regex>
#include <set>

#include "model/lm_head_quant.h"
#include "util/log.h"

namespace m2 {
namespace {

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

void add_linear(std::vector<TensorSpec>& out, const ModelConfig& c, const std::string& prefix,
                const std::string& module, int64_t rows, int64_t cols) {
  const bool fp8 = c.is_fp8_module(module);
  out.push_back({prefix + ".weight", Shape{rows, cols}, fp8 ? DType::kF8E4M3 : c.dtype, TensorSpec::Kind::kLinear});
  if (fp8) {
    out.push_back({prefix + ".weight_scale_inv",
                   Shape{ceil_div(rows, c.fp8->block_rows), ceil_div(cols, c.fp8->block_cols)}, DType::kF32,
                   TensorSpec::Kind::kScale});
  }
}

}  // namespace

std::vector<TensorSpec> expected_tensors(const ModelConfig& c) {
  using K = TensorSpec::Kind;
  const int64_t H = c.hidden_size, I = c.intermediate_size, V = c.vocab_size, E = c.num_local_experts;
  std::vector<TensorSpec> t;
  t.push_back({"model.embed_tokens.weight", Shape{V, H}, c.dtype, K::kEmbedding});
  for (int l = 0; l < c.num_hidden_layers; ++l) {
    const std::string p = fmt::format("model.layers.{}.", l);
    t.push_back({p + "input_layernorm.weight", Shape{H}, c.dtype, K::kNorm});
    add_linear(t, c, p + "self_attn.q_proj", "q_proj", c.q_dim(), H);
    add_linear(t, c, p + "self_attn.k_proj", "k_proj", c.kv_dim(), H);
    add_linear(t, c, p + "self_attn.v_proj", "v_proj", c.kv_dim(), H);
    add_linear(t, c, p + "self_attn.o_proj", "o_proj", H, c.q_dim());
    if (c.use_qk_norm) {
      t.push_back({p + "self_attn.q_norm.weight", Shape{c.q_dim()}, c.dtype, K::kNorm});
      t.push_back({p + "self_attn.k_norm.weight", Shape{c.kv_dim()}, c.dtype, K::kNorm});
    }
    t.push_back({p + "post_attention_layernorm.weight", Shape{H}, c.dtype, K::kNorm});
    t.push_back({p + "block_sparse_moe.gate.weight", Shape{E, H}, DType::kF32, K::kRouter});
    if (c.use_routing_bias)
      t.push_back({p + "block_sparse_moe.e_score_correction_bias", Shape{E}, DType::kF32, K::kRouterBias});
    for (int e = 0; e < E; ++e) {
      const std::string ep = fmt::format("{}block_sparse_moe.experts.{}.", p, e);
      add_linear(t, c, ep + "w1", "w1", I, H);
      add_linear(t, c, ep + "w2", "w2", H, I);
      add_linear(t, c, ep + "w3", "w3", I, H);
    }
  }
  t.push_back({"model.norm.weight", Shape{H}, c.dtype, K::kNorm});
  if (!c.tie_word_embeddings) t.push_back({"lm_head.weight", Shape{V, H}, c.dtype, K::kLinear});
  return t;
}

Result<ModelConfig> load_config_from(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::is_directory(path, ec)) return load_model_config((fs::path(path) / "config.json").string());
  return load_model_config(path);
}

namespace {

// Fills the typed views of `w` from a name -> view lookup.
template <typename Get>
Status bind_weights(ModelWeights& w, Get get) {
  const ModelConfig& c = w.config;
  auto linear = [&](const std::string& prefix, Linear* out) -> Status {
    M2_ASSIGN_OR_RETURN(out->weight, get(prefix + ".weight"));
    if (out->weight.dtype == DType::kF8E4M3) {
      M2_ASSIGN_OR_RETURN(out->scale_inv, get(prefix + ".weight_scale_inv"));
      out->block_rows = c.fp8 ? c.fp8->block_rows : 128;
      out->block_cols = c.fp8 ? c.fp8->block_cols : 128;
    }
    return Status();
  };
  M2_ASSIGN_OR_RETURN(w.embed, get("model.embed_tokens.weight"));
  M2_ASSIGN_OR_RETURN(w.final_norm, get("model.norm.weight"));
  if (c.tie_word_embeddings) {
    w.lm_head.weight = w.embed;
  } else {
    M2_RETURN_IF_ERROR(linear("lm_head", &w.lm_head));
  }
  w.layers.resize(c.num_hidden_layers);
  for (int l = 0; l < c.num_hidden_layers; ++l) {
    LayerWeights& L = w.layers[l];
    const std::string p = fmt::format("model.layers.{}.", l);
    M2_ASSIGN_OR_RETURN(L.input_norm, get(p + "input_layernorm.weight"));
    M2_ASSIGN_OR_RETURN(L.post_attention_norm, get(p + "post_attention_layernorm.weight"));
    M2_RETURN_IF_ERROR(linear(p + "self_attn.q_proj", &L.q_proj));
    M2_RETURN_IF_ERROR(linear(p + "self_attn.k_proj", &L.k_proj));
    M2_RETURN_IF_ERROR(linear(p + "self_attn.v_proj", &L.v_proj));
    M2_RETURN_IF_ERROR(linear(p + "self_attn.o_proj", &L.o_proj));
    if (c.use_qk_norm) {
      M2_ASSIGN_OR_RETURN(L.q_norm, get(p + "self_attn.q_norm.weight"));
      M2_ASSIGN_OR_RETURN(L.k_norm, get(p + "self_attn.k_norm.weight"));
    }
    M2_ASSIGN_OR_RETURN(L.router, get(p + "block_sparse_moe.gate.weight"));
    if (c.use_routing_bias) {
      M2_ASSIGN_OR_RETURN(L.router_bias, get(p + "block_sparse_moe.e_score_correction_bias"));
    }
    L.experts.resize(c.num_local_experts);
    for (int e = 0; e < c.num_local_experts; ++e) {
      const std::string ep = fmt::format("{}block_sparse_moe.experts.{}.", p, e);
      M2_RETURN_IF_ERROR(linear(ep + "w1", &L.experts[e].w1));
      M2_RETURN_IF_ERROR(linear(ep + "w2", &L.experts[e].w2));
      M2_RETURN_IF_ERROR(linear(ep + "w3", &L.experts[e].w3));
    }
  }
  return Status();
}

// Checks one stored tensor against what the model expects of it.
Status check_tensor(const Checkpoint& ck, const TensorSpec& spec, const SafetensorsEntry& e,
                    const ModelConfig& c, const std::map<std::string, const SafetensorsEntry*>& present) {
  const std::string where = fmt::format("{}: tensor '{}'", ck.file_of(spec.name), spec.name);
  if (e.shape != spec.shape)
    return errorf("{}: shape {} but the config implies {}", where, e.shape.str(), spec.shape.str());
  switch (spec.kind) {
    case TensorSpec::Kind::kLinear:
      if (e.dtype == DType::kF8E4M3) {
        if (!c.fp8)
          return errorf("{}: stored as F8_E4M3 but config.json has no fp8 quantization_config", where);
        const std::string scale = spec.name.substr(0, spec.name.size() - 7) + ".weight_scale_inv";
        auto it = present.find(scale);
        if (it == present.end()) return errorf("{}: F8_E4M3 weight without its '{}'", where, scale);
        const Shape want{ceil_div(spec.shape[0], c.fp8->block_rows), ceil_div(spec.shape[1], c.fp8->block_cols)};
        if (it->second->shape != want || it->second->dtype != DType::kF32)
          return errorf("{}: '{}' is {} {} but {} x {} blocks need F32 {}", where, scale,
                        dtype_name(it->second->dtype), it->second->shape.str(), c.fp8->block_rows,
                        c.fp8->block_cols, want.str());
        return Status();
      }
      [[fallthrough]];
    case TensorSpec::Kind::kEmbedding:
    case TensorSpec::Kind::kNorm:
    case TensorSpec::Kind::kRouter:
    case TensorSpec::Kind::kRouterBias:
      if (e.dtype != DType::kF32 && e.dtype != DType::kBF16 && e.dtype != DType::kF16)
        return errorf("{}: dtype {} is not supported here (F32, BF16 or F16{})", where, dtype_name(e.dtype),
                      spec.kind == TensorSpec::Kind::kLinear ? ", or F8_E4M3 with weight_scale_inv" : "");
      return Status();
    case TensorSpec::Kind::kScale:
      return Status();  // checked with its weight
  }
  return Status();
}

// MTP modules (declared, never released) live at layers >= num_hidden_layers;
// layers cut by --num-layers are also skipped.
bool is_skippable(const std::string& name, int kept_layers, int config_layers, int* skipped_layer) {
  static const std::regex layer_re(R"(^model\.layers\.(\d+)\.)");
  std::smatch m;
  if (std::regex_search(name, m, layer_re)) {
    const int l = std::stoi(m[1].str());
    if (l >= kept_layers) {
      *skipped_layer = l;
      return true;
    }
    (void)config_layers;
  }
  if (name.find("rotary_emb.inv_freq") != std::string::npos) return true;  // old HF exports
  return false;
}

// load_model without its conversions: the weights as stored (or generated).
Result<std::unique_ptr<ModelWeights>> load_stored(const std::string& path, const LoadOptions& options) {
  namespace fs = std::filesystem;
  M2_ASSIGN_OR_RETURN(ModelConfig config, load_config_from(path));
  const int config_layers = config.num_hidden_layers;
  if (options.num_layers > 0) {
    if (options.num_layers > config.num_hidden_layers)
      return errorf("--num-layers {} exceeds the model's {} layers", options.num_layers, config.num_hidden_layers);
    config.num_hidden_layers = options.num_layers;
  }
  LoadOptions::Format format = options.format;
  std::error_code ec;
  if (format == LoadOptions::Format::kAuto)
    format = fs::is_directory(path, ec) ? LoadOptions::Format::kSafetensors : LoadOptions::Format::kDummy;
  if (format == LoadOptions::Format::kDummy) return make_dummy_weights(config, options.seed, options.dummy_fp8_on_device);
  if (!fs::is_directory(path, ec)) return errorf("{}: not a model directory", path);

  auto w = std::make_unique<ModelWeights>();
  w->config = config;
  M2_ASSIGN_OR_RETURN(w->checkpoint, Checkpoint::open(path));
  const Checkpoint& ck = *w->checkpoint;

  const std::vector<TensorSpec> specs = expected_tensors(config);
  std::map<std::string, const SafetensorsEntry*> present;
  for (const std::string& name : ck.names()) present[name] = ck.entry(name);
  std::set<std::string> expected_names;
  for (const TensorSpec& s : specs) {
    expected_names.insert(s.name);
    if (s.kind == TensorSpec::Kind::kScale) continue;  // optional: only F8 weights need one
    auto it = present.find(s.name);
    if (it == present.end()) return errorf("{}: missing tensor '{}' ({} {})", path, s.name, s.shape.str(), dtype_name(s.dtype));
    M2_RETURN_IF_ERROR(check_tensor(ck, s, *it->second, config, present));
  }
  int skipped = 0, skipped_layer_max = -1;
  for (const auto& [name, entry] : present) {
    if (expected_names.count(name)) {
      if (name.size() > 17 && name.compare(name.size() - 17, 17, ".weight_scale_inv") == 0) {
        const std::string weight = name.substr(0, name.size() - 17) + ".weight";
        auto it = present.find(weight);
        if (it != present.end() && it->second->dtype != DType::kF8E4M3)
          return errorf("{}: tensor '{}' scales '{}', which is {} rather than F8_E4M3", ck.file_of(name), name,
                        weight, dtype_name(it->second->dtype));
      }
      continue;
    }
    int layer = -1;
    if (is_skippable(name, config.num_hidden_layers, config_layers, &layer)) {
      ++skipped;
      skipped_layer_max = std::max(skipped_layer_max, layer);
      continue;
    }
    return errorf("{}: unexpected tensor '{}' (not part of MiniMaxM2ForCausalLM with this config)", ck.file_of(name),
                  name);
  }
  if (skipped) {
    log_info("{}: skipped {} tensors of layers >= {} (MTP modules or --num-layers)", path, skipped,
             config.num_hidden_layers);
  }
  M2_RETURN_IF_ERROR(bind_weights(*w, [&](const std::string& name) { return ck.get(name); }));
  return w;
}

}  // namespace

Result<std::unique_ptr<ModelWeights>> load_model(const std::string& path, const LoadOptions& options) {
  M2_ASSIGN_OR_RETURN(std::unique_ptr<ModelWeights> w, load_stored(path, options));
  if (options.fp8_lm_head) M2_RETURN_IF_ERROR(quantize_lm_head_fp8(*w));
  return w;
}

// Used by dummy_weights.cpp to wire owned buffers the same way as a checkpoint.
Status bind_dummy_weights(ModelWeights& w, const std::map<std::string, TensorView>& views) {
  return bind_weights(w, [&](const std::string& name) -> Result<TensorView> {
    auto it = views.find(name);
    if (it == views.end()) return errorf("dummy weights: missing tensor '{}'", name);
    return it->second;
  });
}

}  // namespace m2
