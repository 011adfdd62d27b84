#include "io/model_config.h"

#include <algorithm>
#include <cmath>

namespace m2 {
namespace {

// Field readers that name the document and field on every failure.
class Fields {
 public:
  Fields(const Json& j, const std::string& source) : j_(j), source_(source) {}

  const Json* find(const char* key) const {
    auto it = j_.find(key);
    return (it == j_.end() || it->is_null()) ? nullptr : &*it;
  }

  Status require_int(const char* key, int* out) const {
    const Json* v = find(key);
    if (!v) return errorf("{}: missing required field '{}'", source_, key);
    return read_int(key, *v, out);
  }
  Status optional_int(const char* key, int* out) const {
    const Json* v = find(key);
    return v ? read_int(key, *v, out) : Status();
  }
  Status read_int(const char* key, const Json& v, int* out) const {
    if (!v.is_number_integer()) return errorf("{}: field '{}' is a {}, expected an integer", source_, key, json_type_name(v));
    const int64_t x = v.get<int64_t>();
    if (x < 0 || x > (1ll << 31) - 1) return errorf("{}: field '{}' = {} is out of range", source_, key, x);
    *out = static_cast<int>(x);
    return Status();
  }
  Status optional_number(const char* key, double* out) const {
    const Json* v = find(key);
    if (!v) return Status();
    if (!v->is_number()) return errorf("{}: field '{}' is a {}, expected a number", source_, key, json_type_name(*v));
    *out = v->get<double>();
    return Status();
  }
  Status optional_bool(const char* key, bool* out) const {
    const Json* v = find(key);
    if (!v) return Status();
    if (!v->is_boolean()) return errorf("{}: field '{}' is a {}, expected true or false", source_, key, json_type_name(*v));
    *out = v->get<bool>();
    return Status();
  }
  Status optional_string(const char* key, std::string* out) const {
    const Json* v = find(key);
    if (!v) return Status();
    if (!v->is_string()) return errorf("{}: field '{}' is a {}, expected a string", source_, key, json_type_name(*v));
    *out = v->get<std::string>();
    return Status();
  }
  const std::string& source() const { return source_; }

 private:
  const Json& j_;
  const std::string& source_;
};

Result<DType> parse_dtype_name(const std::string& s, const std::string& where) {
  if (s == "bfloat16") return DType::kBF16;
  if (s == "float16" || s == "half") return DType::kF16;
  if (s == "float32" || s == "float") return DType::kF32;
  return errorf("{}: dtype '{}' is not supported (bfloat16, float16, float32)", where, s);
}

Status parse_quantization(const Json& q, const std::string& source, ModelConfig* c) {
  if (!q.is_object()) return errorf("{}: 'quantization_config' is a {}, expected an object", source, json_type_name(q));
  const std::string method = q.value("quant_method", "");
  if (method != "fp8")
    return errorf("{}: quantization_config.quant_method '{}' is not supported (only 'fp8' block-scaled)", source, method);
  const std::string fmt_name = q.value("fmt", "float8_e4m3fn");
  if (fmt_name != "float8_e4m3fn" && fmt_name != "e4m3")
    return errorf("{}: quantization_config.fmt '{}' is not supported (only float8_e4m3fn)", source, fmt_name);
  const std::string scheme = q.value("activation_scheme", "dynamic");
  if (scheme != "dynamic")
    return errorf("{}: quantization_config.activation_scheme '{}' is not supported (only 'dynamic')", source, scheme);
  Fp8Quantization f;
  auto bs = q.find("weight_block_size");
  if (bs == q.end() || !bs->is_array() || bs->size() != 2 || !(*bs)[0].is_number_integer() ||
      !(*bs)[1].is_number_integer())
    return errorf("{}: quantization_config.weight_block_size must be [rows, cols] (block-scaled FP8)", source);
  f.block_rows = (*bs)[0].get<int>();
  f.block_cols = (*bs)[1].get<int>();
  if (f.block_rows <= 0 || f.block_cols <= 0)
    return errorf("{}: quantization_config.weight_block_size {} must be positive", source, bs->dump());
  if (auto m = q.find("modules_to_not_convert"); m != q.end() && !m->is_null()) {
    if (!m->is_array()) return errorf("{}: quantization_config.modules_to_not_convert must be a list", source);
    for (const Json& s : *m) {
      if (!s.is_string()) return errorf("{}: quantization_config.modules_to_not_convert holds a non-string", source);
      f.modules_to_not_convert.push_back(s.get<std::string>());
    }
  }
  c->fp8 = f;
  return Status();
}

}  // namespace

bool ModelConfig::is_fp8_module(const std::string& module_name) const {
  if (!fp8) return false;
  for (const auto& m : fp8->modules_to_not_convert) {
    if (m == module_name) return false;
  }
  // The router and the head are never quantized in any released checkpoint,
  // whatever modules_to_not_convert says.
  return module_name != "gate" && module_name != "lm_head";
}

Result<ModelConfig> parse_model_config(const Json& j, const std::string& source) {
  if (!j.is_object()) return errorf("{}: expected a JSON object", source);
  Fields f(j, source);
  ModelConfig c;

  f.optional_string("model_type", &c.model_type);
  bool arch_ok = false;
  if (const Json* a = f.find("architectures"); a && a->is_array()) {
    for (const Json& s : *a) arch_ok |= s.is_string() && s.get<std::string>() == "MiniMaxM2ForCausalLM";
  }
  if (c.model_type != "minimax_m2" && !arch_ok)
    return errorf("{}: model_type '{}' is not minimax_m2 (architectures do not name MiniMaxM2ForCausalLM)", source,
                  c.model_type);

  M2_RETURN_IF_ERROR(f.require_int("vocab_size", &c.vocab_size));
  M2_RETURN_IF_ERROR(f.require_int("hidden_size", &c.hidden_size));
  M2_RETURN_IF_ERROR(f.require_int("intermediate_size", &c.intermediate_size));
  M2_RETURN_IF_ERROR(f.require_int("num_hidden_layers", &c.num_hidden_layers));
  M2_RETURN_IF_ERROR(f.require_int("num_attention_heads", &c.num_attention_heads));
  c.num_key_value_heads = c.num_attention_heads;
  M2_RETURN_IF_ERROR(f.optional_int("num_key_value_heads", &c.num_key_value_heads));
  M2_RETURN_IF_ERROR(f.require_int("num_local_experts", &c.num_local_experts));
  M2_RETURN_IF_ERROR(f.require_int("num_experts_per_tok", &c.num_experts_per_tok));
  c.max_position_embeddings = 196608;
  M2_RETURN_IF_ERROR(f.optional_int("max_position_embeddings", &c.max_position_embeddings));
  M2_RETURN_IF_ERROR(f.optional_number("rms_norm_eps", &c.rms_norm_eps));
  if (c.num_attention_heads == 0 || c.hidden_size == 0 || c.num_hidden_layers == 0 || c.vocab_size == 0 ||
      c.num_key_value_heads == 0 || c.num_local_experts == 0 || c.intermediate_size == 0)
    return errorf("{}: sizes must be positive (vocab, hidden, intermediate, layers, heads, kv heads, experts)", source);
  c.head_dim = c.hidden_size / c.num_attention_heads;
  M2_RETURN_IF_ERROR(f.optional_int("head_dim", &c.head_dim));
  if (c.head_dim <= 0 || c.head_dim % 2) return errorf("{}: head_dim {} must be positive and even", source, c.head_dim);
  if (c.num_attention_heads % c.num_key_value_heads)
    return errorf("{}: num_attention_heads {} is not a multiple of num_key_value_heads {}", source,
                  c.num_attention_heads, c.num_key_value_heads);
  if (c.num_experts_per_tok <= 0 || c.num_experts_per_tok > c.num_local_experts)
    return errorf("{}: num_experts_per_tok {} must be in 1..num_local_experts ({})", source, c.num_experts_per_tok,
                  c.num_local_experts);

  // RoPE: legacy top-level fields, or transformers-v5 rope_parameters.
  double partial = 1.0;
  bool have_rotary = false;
  if (const Json* rd = f.find("rotary_dim")) {
    M2_RETURN_IF_ERROR(f.read_int("rotary_dim", *rd, &c.rotary_dim));
    have_rotary = true;
  }
  M2_RETURN_IF_ERROR(f.optional_number("rope_theta", &c.rope_theta));
  M2_RETURN_IF_ERROR(f.optional_number("partial_rotary_factor", &partial));
  if (const Json* rp = f.find("rope_parameters")) {
    if (!rp->is_object()) return errorf("{}: 'rope_parameters' must be an object", source);
    Fields r(*rp, source);
    M2_RETURN_IF_ERROR(r.optional_number("rope_theta", &c.rope_theta));
    M2_RETURN_IF_ERROR(r.optional_number("partial_rotary_factor", &partial));
    std::string type = "default";
    M2_RETURN_IF_ERROR(r.optional_string("rope_type", &type));
    if (type != "default")
      return errorf("{}: rope_parameters.rope_type '{}' is not supported (only 'default', no scaling)", source, type);
  }
  if (const Json* rs = f.find("rope_scaling"); rs && !(rs->is_object() && rs->empty()))
    return errorf("{}: 'rope_scaling' {} is not supported (MiniMax-M2 uses plain RoPE)", source, rs->dump());
  if (!have_rotary) c.rotary_dim = static_cast<int>(std::lround(partial * c.head_dim));
  if (c.rotary_dim <= 0 || c.rotary_dim > c.head_dim || c.rotary_dim % 2)
    return errorf("{}: rotary dimension {} must be even and in 1..head_dim ({})", source, c.rotary_dim, c.head_dim);
  if (!(c.rope_theta > 0)) return errorf("{}: rope_theta {} must be positive", source, c.rope_theta);

  // Attention variant.
  M2_RETURN_IF_ERROR(f.optional_bool("use_qk_norm", &c.use_qk_norm));
  std::string qk_type = "per_layer";
  M2_RETURN_IF_ERROR(f.optional_string("qk_norm_type", &qk_type));
  if (c.use_qk_norm && qk_type != "per_layer")
    return errorf("{}: qk_norm_type '{}' is not supported (only 'per_layer': one RMSNorm over all heads)", source,
                  qk_type);
  if (const Json* atl = f.find("attn_type_list")) {
    if (!atl->is_array() || atl->size() != static_cast<size_t>(c.num_hidden_layers))
      return errorf("{}: attn_type_list must list {} layers", source, c.num_hidden_layers);
    for (size_t i = 0; i < atl->size(); ++i) {
      if (!(*atl)[i].is_number_integer() || (*atl)[i].get<int>() != 1)
        return errorf("{}: attn_type_list[{}] = {}: only full softmax attention (1) is supported, not linear "
                      "attention (0)", source, i, (*atl)[i].dump());
    }
  }
  if (const Json* lt = f.find("layer_types")) {
    if (!lt->is_array()) return errorf("{}: 'layer_types' must be a list", source);
    for (size_t i = 0; i < lt->size(); ++i) {
      if (!(*lt)[i].is_string() || (*lt)[i].get<std::string>() != "full_attention")
        return errorf("{}: layer_types[{}] = {}: only 'full_attention' is supported", source, i, (*lt)[i].dump());
    }
  }
  if (const Json* sw = f.find("sliding_window"))
    return errorf("{}: sliding_window {} is not supported (MiniMax-M2 attends to the full context)", source,
                  sw->dump());
  bool attention_bias = false;
  M2_RETURN_IF_ERROR(f.optional_bool("attention_bias", &attention_bias));
  if (attention_bias) return errorf("{}: attention_bias true is not supported", source);

  // MoE variant.
  std::string scoring = "sigmoid";
  M2_RETURN_IF_ERROR(f.optional_string("scoring_func", &scoring));
  if (scoring != "sigmoid")
    return errorf("{}: scoring_func '{}' is not supported (only 'sigmoid' routing)", source, scoring);
  M2_RETURN_IF_ERROR(f.optional_bool("use_routing_bias", &c.use_routing_bias));
  M2_RETURN_IF_ERROR(f.optional_number("routed_scaling_factor", &c.routed_scaling_factor));
  int shared = 0;
  M2_RETURN_IF_ERROR(f.optional_int("shared_intermediate_size", &shared));
  if (shared != 0) return errorf("{}: shared_intermediate_size {}: shared experts are not supported", source, shared);
  for (const char* key : {"n_group", "topk_group"}) {
    int g = 1;
    M2_RETURN_IF_ERROR(f.optional_int(key, &g));
    if (g > 1) return errorf("{}: {} = {}: group-limited routing is not supported", source, key, g);
  }
  std::string act = "silu";
  M2_RETURN_IF_ERROR(f.optional_string("hidden_act", &act));
  if (act != "silu") return errorf("{}: hidden_act '{}' is not supported (only 'silu' SwiGLU experts)", source, act);

  // Storage.
  M2_RETURN_IF_ERROR(f.optional_bool("tie_word_embeddings", &c.tie_word_embeddings));
  std::string dtype_name_str;
  M2_RETURN_IF_ERROR(f.optional_string("torch_dtype", &dtype_name_str));
  M2_RETURN_IF_ERROR(f.optional_string("dtype", &dtype_name_str));
  if (!dtype_name_str.empty()) {
    M2_ASSIGN_OR_RETURN(c.dtype, parse_dtype_name(dtype_name_str, source + ": field 'dtype'"));
  }
  if (const Json* q = f.find("quantization_config")) M2_RETURN_IF_ERROR(parse_quantization(*q, source, &c));

  M2_RETURN_IF_ERROR(f.optional_int("num_mtp_modules", &c.num_mtp_modules));
  int id = 0;
  if (const Json* b = f.find("bos_token_id"); b && b->is_number_integer()) {
    M2_RETURN_IF_ERROR(f.read_int("bos_token_id", *b, &id));
    c.bos_token_id = id;
  }
  if (const Json* e = f.find("eos_token_id"); e && e->is_number_integer()) {
    M2_RETURN_IF_ERROR(f.read_int("eos_token_id", *e, &id));
    c.eos_token_id = id;
  }
  return c;
}

Result<ModelConfig> load_model_config(const std::string& path) {
  M2_ASSIGN_OR_RETURN(Json j, read_json_file(path));
  return parse_model_config(j, path);
}

}  // namespace m2
