#include "model/weight_update.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <regex>
#include <set>

#include "model/lm_head_quant.h"
#include "util/mapped_file.h"
#include "util/log.h"

namespace m2 {

// weights.cpp: binds a ModelWeights' views from a name -> view map.
Status bind_dummy_weights(ModelWeights& w, const std::map<std::string, TensorView>& views);

namespace {

constexpr std::string_view kWeight = ".weight";
constexpr std::string_view kScale = ".weight_scale_inv";

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// Calls f(checkpoint name, view) for every tensor view of w (the tied
// lm_head is the embedding: not visited twice). W: ModelWeights, const or not.
template <class W, class F>
void visit_views(W& w, F&& f) {
  auto linear = [&](const std::string& prefix, auto& l) {
    f(prefix + ".weight", l.weight);
    if (!l.scale_inv.empty()) f(prefix + ".weight_scale_inv", l.scale_inv);
  };
  const ModelConfig& c = w.config;
  f(std::string("model.embed_tokens.weight"), w.embed);
  f(std::string("model.norm.weight"), w.final_norm);
  if (!c.tie_word_embeddings) linear("lm_head", w.lm_head);
  for (int l = 0; l < static_cast<int>(w.layers.size()); ++l) {
    auto& L = w.layers[l];
    const std::string p = fmt::format("model.layers.{}.", l);
    f(p + "input_layernorm.weight", L.input_norm);
    f(p + "post_attention_layernorm.weight", L.post_attention_norm);
    linear(p + "self_attn.q_proj", L.q_proj);
    linear(p + "self_attn.k_proj", L.k_proj);
    linear(p + "self_attn.v_proj", L.v_proj);
    linear(p + "self_attn.o_proj", L.o_proj);
    if (!L.q_norm.empty()) f(p + "self_attn.q_norm.weight", L.q_norm);
    if (!L.k_norm.empty()) f(p + "self_attn.k_norm.weight", L.k_norm);
    f(p + "block_sparse_moe.gate.weight", L.router);
    if (!L.router_bias.empty()) f(p + "block_sparse_moe.e_score_correction_bias", L.router_bias);
    for (int e = 0; e < static_cast<int>(L.experts.size()); ++e) {
      const std::string ep = fmt::format("{}block_sparse_moe.experts.{}.", p, e);
      linear(ep + "w1", L.experts[e].w1);
      linear(ep + "w2", L.experts[e].w2);
      linear(ep + "w3", L.experts[e].w3);
    }
  }
}

// A served head quantised at load (--lm-head-dtype fp8, lm_head_quant.h)
// takes a trainer's head in its own float dtype: such an update is quantised
// as the load was, into the served FP8 pair, by build_updated_weights.
bool is_head_to_quantise(const ModelWeights& served, const UpdateTensor& u) {
  return u.name == "lm_head.weight" && served.lm_head.is_fp8() &&
         (u.dtype == DType::kBF16 || u.dtype == DType::kF16 || u.dtype == DType::kF32);
}

// The FP8 codes and block scales of a float lm_head update, with the served
// head's block shape: two tensors in place of one.
void quantise_head_update(const ModelWeights& served, std::vector<UpdateTensor>& updates) {
  const Linear& head = served.lm_head;
  for (size_t i = 0; i < updates.size(); ++i) {
    if (!is_head_to_quantise(served, updates[i])) continue;
    const UpdateTensor src = std::move(updates[i]);
    UpdateTensor codes{src.name, DType::kF8E4M3, src.shape, nullptr, src.source + " (quantised to FP8 e4m3)"};
    UpdateTensor scales{"lm_head.weight_scale_inv", DType::kF32, head.scale_inv.shape, nullptr, codes.source};
    std::shared_ptr<uint8_t[]> code_bytes(new uint8_t[static_cast<size_t>(src.shape.numel())]);
    std::shared_ptr<uint8_t[]> scale_bytes(new uint8_t[scales.shape.numel() * sizeof(float)]);
    quantize_fp8_blocks(TensorView{src.dtype, src.shape, src.data.get()}, head.block_rows, head.block_cols,
                        code_bytes.get(), reinterpret_cast<float*>(scale_bytes.get()));
    codes.data = std::move(code_bytes), scales.data = std::move(scale_bytes);
    updates[i] = std::move(codes);
    updates.push_back(std::move(scales));
    return;
  }
}

std::shared_ptr<uint8_t[]> copy_bytes(const void* src, size_t n) {
  std::shared_ptr<uint8_t[]> out(new uint8_t[n > 0 ? n : 1]);
  if (n > 0) std::memcpy(out.get(), src, n);
  return out;
}

}  // namespace

std::shared_ptr<WeightSet> wrap_loaded_weights(std::unique_ptr<ModelWeights> loaded) {
  auto set = std::make_shared<WeightSet>();
  set->origin = std::shared_ptr<ModelWeights>(std::move(loaded));
  return set;
}

std::map<std::string, TensorView> weight_views(const ModelWeights& w) {
  std::map<std::string, TensorView> m;
  visit_views(w, [&](const std::string& name, const TensorView& v) { m[name] = v; });
  return m;
}

Status release_replaced_bytes(WeightSet& set) {
  if (!set.rebound || set.replaced.empty()) return Status();
  // One reservation for the released tensors, each view at its own 64-byte
  // aligned offset (an empty view too: its address stays unique).
  std::map<std::string, uint64_t> offsets;
  uint64_t total = 0;
  visit_views(*set.rebound, [&](const std::string& name, const TensorView& v) {
    if (!set.replaced.count(name)) return;
    offsets[name] = total;
    total += (static_cast<uint64_t>(v.nbytes()) + 64) / 64 * 64;
  });
  M2_ASSIGN_OR_RETURN(std::shared_ptr<void> region, reserve_inaccessible(total));
  const auto* base = static_cast<const uint8_t*>(region.get());
  visit_views(*set.rebound, [&](const std::string& name, TensorView& v) {
    if (auto it = offsets.find(name); it != offsets.end()) v.data = base + it->second;
  });
  if (set.rebound->config.tie_word_embeddings) set.rebound->lm_head.weight.data = set.rebound->embed.data;  // (as bound)
  set.replaced.clear();
  // Earlier reservations are kept while a view still points into one (the
  // tensors this update left as they were): one pass over the views.
  std::vector<bool> used(set.stand_ins.size(), false);
  visit_views(*set.rebound, [&](const std::string&, const TensorView& v) {
    const auto* d = static_cast<const uint8_t*>(v.data);
    for (size_t i = 0; i < set.stand_ins.size(); ++i) {
      const auto* b = static_cast<const uint8_t*>(set.stand_ins[i].region.get());
      if (d >= b && d < b + set.stand_ins[i].bytes) used[i] = true;
    }
  });
  std::vector<WeightSet::StandIn> kept{{region, total}};
  for (size_t i = 0; i < set.stand_ins.size(); ++i)
    if (used[i]) kept.push_back(std::move(set.stand_ins[i]));
  set.stand_ins = std::move(kept);
  return Status();
}

Status check_update_tensors(const ModelWeights& served, std::span<const UpdateTensor> updates) {
  const std::map<std::string, TensorView> views = weight_views(served);
  std::set<std::string> seen;
  for (const UpdateTensor& u : updates) {
    const std::string where = fmt::format("{}: tensor '{}'", u.source, u.name);
    auto it = views.find(u.name);
    if (it == views.end()) {
      std::string hint;
      if (u.name == "lm_head.weight" && served.config.tie_word_embeddings) hint = " (the served model ties lm_head to the embedding)";
      return errorf("{} is not a tensor of the served model{}", where, hint);
    }
    if (!seen.insert(u.name).second) return errorf("{} is given twice in this update", where);
    const TensorView& v = it->second;
    if (is_head_to_quantise(served, u)) {
      if (std::any_of(updates.begin(), updates.end(), [](const UpdateTensor& t) { return t.name == "lm_head.weight_scale_inv"; }))
        return errorf("{}: a {} head with a 'lm_head.weight_scale_inv': the served FP8 head's scales come from "
                      "quantising it (--lm-head-dtype fp8)", where, dtype_name(u.dtype));
    } else if (u.dtype != v.dtype)
      return errorf("{}: dtype {} but the served tensor is {} (an update keeps each tensor's dtype)", where,
                    dtype_name(u.dtype), dtype_name(v.dtype));
    if (u.shape != v.shape) return errorf("{}: shape {} but the served tensor is {}", where, u.shape.str(), v.shape.str());
    if (!u.data && v.nbytes() > 0) return errorf("{}: no data", where);
  }
  return Status();
}

Result<std::shared_ptr<WeightSet>> build_updated_weights(const WeightSet& current, std::vector<UpdateTensor> updates,
                                                         std::shared_ptr<Checkpoint> source) {
  const ModelWeights& cur = current.weights();
  if (updates.empty()) return errorf("the update holds no tensor");
  M2_RETURN_IF_ERROR(check_update_tensors(cur, updates));
  quantise_head_update(cur, updates);
  std::map<std::string, TensorView> views = weight_views(cur);
  std::map<std::string, const UpdateTensor*> by_name;
  for (const UpdateTensor& u : updates) by_name[u.name] = &u;
  // An FP8 weight's values mean nothing without their block scales, and the
  // other way round: the two are replaced together.
  for (const auto& [name, u] : by_name) {
    if (ends_with(name, kScale)) {
      const std::string weight = name.substr(0, name.size() - kScale.size()) + std::string(kWeight);
      if (!by_name.count(weight))
        return errorf("{}: tensor '{}' without its F8_E4M3 weight '{}' (the two are replaced together)", u->source,
                      name, weight);
    } else if (u->dtype == DType::kF8E4M3) {
      const std::string scale = name.substr(0, name.size() - kWeight.size()) + std::string(kScale);
      if (!by_name.count(scale))
        return errorf("{}: F8_E4M3 tensor '{}' without its '{}' (the two are replaced together)", u->source, name,
                      scale);
    }
  }
  auto next = std::make_shared<WeightSet>();
  next->origin = current.origin;
  next->replaced = current.replaced;
  next->stand_ins = current.stand_ins;
  for (UpdateTensor& u : updates) {
    TensorView& v = views[u.name];
    v.data = u.data.get();
    next->replaced[u.name] = std::move(u.data);
  }
  next->rebound = std::make_unique<ModelWeights>();
  next->rebound->config = cur.config;
  next->rebound->checkpoint = std::move(source);
  M2_RETURN_IF_ERROR(bind_dummy_weights(*next->rebound, views));
  return next;
}

Result<UpdateRead> read_update_dir(const std::string& dir, const ModelConfig& served, bool copy) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return errorf("{}: not a directory", dir);
  const fs::path config_path = fs::path(dir) / "config.json";
  if (fs::exists(config_path, ec)) {
    M2_ASSIGN_OR_RETURN(ModelConfig c, load_model_config(config_path.string()));
    auto differs = [&](const char* field, int64_t a, int64_t b) -> Status {
      if (a == b) return Status();
      return errorf("{}: {} is {} but the served model's is {}", config_path.string(), field, a, b);
    };
    M2_RETURN_IF_ERROR(differs("hidden_size", c.hidden_size, served.hidden_size));
    M2_RETURN_IF_ERROR(differs("vocab_size", c.vocab_size, served.vocab_size));
    M2_RETURN_IF_ERROR(differs("intermediate_size", c.intermediate_size, served.intermediate_size));
    M2_RETURN_IF_ERROR(differs("num_local_experts", c.num_local_experts, served.num_local_experts));
    M2_RETURN_IF_ERROR(differs("num_experts_per_tok", c.num_experts_per_tok, served.num_experts_per_tok));
    M2_RETURN_IF_ERROR(differs("num_attention_heads", c.num_attention_heads, served.num_attention_heads));
    M2_RETURN_IF_ERROR(differs("num_key_value_heads", c.num_key_value_heads, served.num_key_value_heads));
    M2_RETURN_IF_ERROR(differs("head_dim", c.head_dim, served.head_dim));
    if (c.num_hidden_layers < served.num_hidden_layers)
      return errorf("{}: num_hidden_layers is {} but the server runs {}", config_path.string(), c.num_hidden_layers,
                    served.num_hidden_layers);
    if (c.fp8.has_value() != served.fp8.has_value())
      return errorf("{}: quantization_config {} but the served model's {}", config_path.string(),
                    c.fp8 ? "is FP8" : "is absent", served.fp8 ? "is FP8" : "is absent");
  }
  M2_ASSIGN_OR_RETURN(std::shared_ptr<Checkpoint> ck, Checkpoint::open(dir));
  static const std::regex layer_re(R"(^model\.layers\.(\d+)\.)");
  UpdateRead out;
  int skipped = 0;
  for (const std::string& name : ck->names()) {
    std::smatch m;
    if ((std::regex_search(name, m, layer_re) && std::stoll(m[1].str()) >= served.num_hidden_layers) ||
        name.find("rotary_emb.inv_freq") != std::string::npos) {
      ++skipped;  // MTP modules and layers the server does not run, as at load
      continue;
    }
    const SafetensorsEntry* e = ck->entry(name);
    M2_ASSIGN_OR_RETURN(TensorView v, ck->get(name));
    UpdateTensor u;
    u.name = name;
    u.dtype = e->dtype;
    u.shape = e->shape;
    // (A view shares the checkpoint's ownership: the mapping lives as long
    // as any tensor of it does.)
    u.data = copy ? std::shared_ptr<const uint8_t[]>(copy_bytes(v.data, v.nbytes()))
                  : std::shared_ptr<const uint8_t[]>(ck, static_cast<const uint8_t*>(v.data));
    u.source = ck->file_of(name);
    out.tensors.push_back(std::move(u));
  }
  if (skipped) log_info("{}: skipped {} tensors of layers the server does not run", dir, skipped);
  if (!copy) out.checkpoint = std::move(ck);
  return out;
}

Result<std::vector<UpdateTensor>> parse_safetensors_bytes(std::string_view bytes, const std::string& what,
                                                          std::map<std::string, std::string>* metadata) {
  const uint64_t size = bytes.size();
  if (size < 8) return errorf("{}: {} bytes, too short for the 8-byte header length", what, size);
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<uint8_t>(bytes[i]);
  if (n > SafetensorsFile::kMaxHeaderBytes)
    return errorf("{}: header length {} exceeds the {}-byte limit", what, n, SafetensorsFile::kMaxHeaderBytes);
  if (n > size - 8)
    return errorf("{}: header length {} exceeds the {} bytes after the length field (truncated?)", what, n, size - 8);
  std::map<std::string, SafetensorsEntry> entries;
  std::map<std::string, std::string> meta;
  M2_RETURN_IF_ERROR(parse_safetensors_header(bytes.substr(8, n), size - 8 - n, 8 + n, what, &entries, &meta));
  std::vector<UpdateTensor> out;
  for (const auto& [name, e] : entries) {
    UpdateTensor u;
    u.name = name;
    u.dtype = e.dtype;
    u.shape = e.shape;
    u.data = copy_bytes(bytes.data() + e.offset, e.nbytes);
    u.source = what;
    out.push_back(std::move(u));
  }
  if (metadata) *metadata = std::move(meta);
  return out;
}

}  // namespace m2
