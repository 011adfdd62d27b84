#include "text/tokenizer/tokenizer.h"

#include <filesystem>

#include "text/tokenizer/added_vocabulary.h"
#include "text/tokenizer/bpe_model.h"
#include "text/tokenizer/byte_level.h"
#include "text/tokenizer/decoders.h"
#include "text/tokenizer/normalizers.h"
#include "text/tokenizer/post_processors.h"
#include "text/tokenizer/pre_tokenizers.h"
#include "text/tokenizer/tokenizer_file.h"
#include "text/tokenizer/utf8.h"
#include "util/json.h"
#include "util/log.h"

namespace m2::text {

using namespace tok;

namespace {

Result<std::unique_ptr<BpeModel>> make_model(TokenizerFile& file, const JsonNode& node) {
  M2_ASSIGN_OR_RETURN(std::string type, node.type_name());
  if (type != "BPE") return node.error(fmt::format("unsupported model type '{}' (only BPE)", type));
  M2_RETURN_IF_ERROR(node.only_keys({"type", "dropout", "unk_token", "continuing_subword_prefix", "end_of_word_suffix",
                                     "fuse_unk", "byte_fallback", "ignore_merges", "vocab", "merges"}));
  if (node.has("dropout")) {
    const Json& d = node.json.at("dropout");
    if (!d.is_number() || d.get<double>() != 0.0) return node.error("dropout is not supported (non-deterministic)");
  }
  if (!file.has_vocab) return node.error("missing vocab object");
  BpeOptions o;
  M2_ASSIGN_OR_RETURN(o.unk_token, node.optional_string("unk_token"));
  M2_ASSIGN_OR_RETURN(auto prefix, node.optional_string("continuing_subword_prefix"));
  M2_ASSIGN_OR_RETURN(auto suffix, node.optional_string("end_of_word_suffix"));
  o.continuing_subword_prefix = prefix.value_or("");
  o.end_of_word_suffix = suffix.value_or("");
  M2_ASSIGN_OR_RETURN(o.fuse_unk, node.bool_field("fuse_unk", false));
  M2_ASSIGN_OR_RETURN(o.byte_fallback, node.bool_field("byte_fallback", false));
  M2_ASSIGN_OR_RETURN(o.ignore_merges, node.bool_field("ignore_merges", false));
  return BpeModel::create(std::move(file.vocab), std::move(file.merges), std::move(o));
}

// "bos_token": "..." or {"content": "...", ...} or null.
Result<std::optional<std::string>> role_content(const Json& config, const char* key, const std::string& path) {
  auto it = config.find(key);
  if (it == config.end() || it->is_null()) return std::optional<std::string>();
  if (it->is_string()) return std::optional<std::string>(it->get<std::string>());
  if (it->is_object() && it->contains("content") && (*it)["content"].is_string()) {
    return std::optional<std::string>((*it)["content"].get<std::string>());
  }
  return errorf("{}: {}: expected a string or {{\"content\": ...}}", path, key);
}

}  // namespace

Tokenizer::Tokenizer() = default;
Tokenizer::~Tokenizer() = default;

Result<std::unique_ptr<Tokenizer>> Tokenizer::from_json_text(std::string_view json, std::string_view what) {
  M2_ASSIGN_OR_RETURN(TokenizerFile file, parse_tokenizer_file(json, what));
  std::unique_ptr<Tokenizer> t(new Tokenizer());
  const JsonNode root{file.doc, ""};
  auto in_file = [&](const Status& s) { return s.with_context(what); };
  for (const char* key : {"truncation", "padding"}) {
    if (root.has(key)) log_warn("{}: '{}' is set and ignored (m2cpp never truncates or pads)", what, key);
  }
  if (!root.has("model")) return in_file(errorf("missing model"));
  auto model = make_model(file, root.child("model"));
  if (!model.ok()) return in_file(model.status());
  t->model_ = std::move(model).value();
  if (root.has("normalizer")) {
    auto n = make_normalizer(root.child("normalizer"));
    if (!n.ok()) return in_file(n.status());
    t->normalizer_ = std::move(n).value();
  }
  if (root.has("pre_tokenizer")) {
    auto p = make_pre_tokenizer(root.child("pre_tokenizer"));
    if (!p.ok()) return in_file(p.status());
    t->pre_tokenizer_ = std::move(p).value();
  }
  if (t->pre_tokenizer_ && t->pre_tokenizer_->uses_first_scheme() && t->normalizer_ &&
      t->normalizer_->may_remove_leading()) {
    return in_file(
        errorf("pre_tokenizer: Metaspace prepend_scheme 'first' after a normalizer that can remove leading "
               "text (Strip, Replace) is not supported"));
  }
  if (root.has("post_processor")) {
    auto p = make_post_processor(root.child("post_processor"));
    if (!p.ok()) return in_file(p.status());
    t->post_processor_ = std::move(p).value();
  }
  if (root.has("decoder")) {
    auto d = make_decoder(root.child("decoder"));
    if (!d.ok()) return in_file(d.status());
    t->decoder_ = std::move(d).value();
  }
  t->added_ = std::make_unique<AddedVocabulary>();
  if (root.has("added_tokens")) {
    auto list = root.array_field("added_tokens");
    if (!list.ok()) return in_file(list.status());
    auto added = AddedVocabulary::build(JsonNode{*list.value(), "added_tokens"}, *t->model_, t->normalizer_.get());
    if (!added.ok()) return in_file(added.status());
    *t->added_ = std::move(added).value();
  }
  t->vocab_size_ = std::max(t->model_->max_id(), t->added_->max_id()) + 1;
  return t;
}

Result<std::unique_ptr<Tokenizer>> Tokenizer::from_json_file(const std::string& path) {
  M2_ASSIGN_OR_RETURN(std::string text, read_text_file(path));
  return from_json_text(text, path);
}

Result<std::unique_ptr<Tokenizer>> Tokenizer::load_from_dir(const std::string& dir) {
  const std::filesystem::path base(dir);
  M2_ASSIGN_OR_RETURN(auto t, from_json_file((base / "tokenizer.json").string()));
  const std::string config = (base / "tokenizer_config.json").string();
  if (std::filesystem::exists(config)) M2_RETURN_IF_ERROR(t->load_roles(config));
  return t;
}

Status Tokenizer::load_roles(const std::string& config_path) {
  M2_ASSIGN_OR_RETURN(Json config, read_json_file(config_path));
  if (!config.is_object()) return errorf("{}: expected a JSON object", config_path);
  struct Slot {
    const char* key;
    std::optional<RoleToken>* role;
  };
  for (const Slot& s : {Slot{"bos_token", &roles_.bos}, Slot{"eos_token", &roles_.eos}, Slot{"unk_token", &roles_.unk},
                        Slot{"pad_token", &roles_.pad}}) {
    M2_ASSIGN_OR_RETURN(auto content, role_content(config, s.key, config_path));
    if (!content) continue;
    RoleToken role{*content, token_to_id(*content)};
    if (!role.id) log_warn("{}: {} '{}' is not a token of the vocabulary", config_path, s.key, *content);
    *s.role = std::move(role);
  }
  return {};
}

Result<std::vector<int32_t>> Tokenizer::encode(std::string_view text, bool add_special_tokens) const {
  if (const size_t bad = find_invalid_utf8(text); bad != std::string_view::npos) {
    return errorf("text is not valid UTF-8 at byte {}", bad);
  }
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 3 + 4);
  std::vector<Segment> raw, normalized_segments;
  added_->split(text, false, raw);
  std::string normalized;
  PieceList pieces;
  for (const Segment& s : raw) {
    if (s.id >= 0) {
      ids.push_back(s.id);
      continue;
    }
    normalized.assign(text.substr(s.begin, s.end - s.begin));
    if (normalizer_) M2_RETURN_IF_ERROR(normalizer_->normalize(normalized));
    normalized_segments.clear();
    added_->split(normalized, true, normalized_segments);
    for (const Segment& n : normalized_segments) {
      if (n.id >= 0) {
        ids.push_back(n.id);
        continue;
      }
      pieces.text.assign(normalized, n.begin, n.end - n.begin);
      pieces.pieces.assign(1, {0, static_cast<uint32_t>(pieces.text.size()), s.begin == 0 && n.begin == 0});
      if (pre_tokenizer_) M2_RETURN_IF_ERROR(pre_tokenizer_->apply(pieces));
      for (const auto& p : pieces.pieces) M2_RETURN_IF_ERROR(model_->tokenize(pieces.view(p), ids));
    }
  }
  if (add_special_tokens && post_processor_) post_processor_->process(ids);
  return ids;
}

std::optional<int32_t> Tokenizer::token_to_id(std::string_view token) const {
  if (auto id = added_->token_to_id(token)) return id;
  return model_->token_to_id(token);
}

std::optional<std::string_view> Tokenizer::id_to_token(int32_t id) const {
  if (auto text = added_->text_of(id)) return text;
  return model_->id_to_token(id);
}

bool Tokenizer::is_special(int32_t id) const {
  auto token = id_to_token(id);
  return token && added_->special_contents().contains(*token);
}

bool Tokenizer::skipped(std::string_view token, bool skip_special_tokens) const {
  return skip_special_tokens && added_->special_contents().contains(token);
}

Result<std::string> Tokenizer::decode(std::span<const int32_t> ids, bool skip_special_tokens) const {
  std::vector<std::string> tokens;
  tokens.reserve(ids.size());
  for (int32_t id : ids) {
    if (auto token = token_for_decode(id, skip_special_tokens)) tokens.emplace_back(*token);
  }
  if (!decoder_) {
    std::string out;
    for (size_t i = 0; i < tokens.size(); ++i) {
      if (i) out += ' ';
      out += tokens[i];
    }
    return out;
  }
  M2_RETURN_IF_ERROR(decoder_->decode_chain(tokens));
  std::string out;
  for (const auto& t : tokens) out += t;
  return out;
}

std::optional<std::string_view> Tokenizer::token_for_decode(int32_t id, bool skip_special_tokens) const {
  auto token = id_to_token(id);
  if (!token || skipped(*token, skip_special_tokens)) return std::nullopt;
  return token;
}

bool Tokenizer::decodes_byte_level() const { return decoder_ && decoder_->is_byte_level(); }

void Tokenizer::byte_level_bytes(std::string_view token, std::string& out) {
  ByteLevelAlphabet::get().decode_token(token, out);
}

bool Tokenizer::decode_awaits_more(std::string_view token) const { return decoder_ && decoder_->awaits_more(token); }

bool Tokenizer::decode_streams_by_window() const { return !decoder_ || decoder_->window_exact(false); }

}  // namespace m2::text
