// The tokenizer of a checkpoint: a Hugging Face tokenizer.json (BPE model,
// normalizer, pre-tokenizer, added tokens, post-processor, decoder) giving
// exactly the ids and text of the `tokenizers` Python package, plus the
// bos/eos/unk/pad tokens of tokenizer_config.json.
//
// Components that are not implemented are refused at load with the JSON path
// of the component; nothing is skipped silently. All const methods are
// thread-safe (the server encodes from several threads).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "util/status.h"

namespace m2::text {

namespace tok {
class AddedVocabulary;
class BpeModel;
class Decoder;
class Normalizer;
class PostProcessor;
class PreTokenizer;
}  // namespace tok

// A role token named by tokenizer_config.json and its id (if it is a token).
struct RoleToken {
  std::string content;
  std::optional<int32_t> id;
};

struct TokenizerRoles {
  std::optional<RoleToken> bos, eos, unk, pad;
};

class Tokenizer {
 public:
  // `dir`/tokenizer.json, and `dir`/tokenizer_config.json if present.
  static Result<std::unique_ptr<Tokenizer>> load_from_dir(const std::string& dir);
  static Result<std::unique_ptr<Tokenizer>> from_json_file(const std::string& path);
  // `what` names the document in errors.
  static Result<std::unique_ptr<Tokenizer>> from_json_text(std::string_view json, std::string_view what);
  ~Tokenizer();

  // Ids of `text` (valid UTF-8, else an error naming the byte). Added tokens
  // are matched in the text; add_special_tokens applies the post-processor
  // (e.g. a BOS template) as HF does. The chat template writes its own BOS,
  // so prompts are encoded with add_special_tokens=false.
  Result<std::vector<int32_t>> encode(std::string_view text, bool add_special_tokens = false) const;

  // HF's decode: ids without a token are dropped, special tokens too if
  // asked, then the decoder chain (joined with ' ' when there is none).
  Result<std::string> decode(std::span<const int32_t> ids, bool skip_special_tokens = false) const;

  // One past the largest id of the model vocabulary or added tokens.
  int32_t vocab_size() const { return vocab_size_; }
  // Added tokens first, then the model vocabulary (as HF). id_to_token gives
  // HF's string, which for an added token marked `normalized` is its
  // normalized content; nullopt for an id without a token.
  std::optional<int32_t> token_to_id(std::string_view token) const;
  std::optional<std::string_view> id_to_token(int32_t id) const;
  // True if the id's token is a special added token (skipped by skip_special_tokens).
  bool is_special(int32_t id) const;

  // From tokenizer_config.json (absent fields stay empty). EOS comes from
  // here, not from a constant.
  const TokenizerRoles& roles() const { return roles_; }
  std::optional<int32_t> bos_id() const { return roles_.bos ? roles_.bos->id : std::nullopt; }
  std::optional<int32_t> eos_id() const { return roles_.eos ? roles_.eos->id : std::nullopt; }

  // For the streaming detokenizer:
  // The string decode() feeds the decoder for `id`, or nullopt if decode()
  // drops the id (no such token, or a special token being skipped).
  std::optional<std::string_view> token_for_decode(int32_t id, bool skip_special_tokens) const;
  // True if decode() is HF's ByteLevel rule alone: the lossy UTF-8 of the
  // concatenated byte_level_bytes() of the tokens.
  bool decodes_byte_level() const;
  static void byte_level_bytes(std::string_view token, std::string& out);
  // True if later tokens can still change how `token` decodes.
  bool decode_awaits_more(std::string_view token) const;
  // True if decoding a sliding window of ids reproduces the full decode
  // (see Decoder::window_exact); otherwise streaming must wait for the end.
  bool decode_streams_by_window() const;

 private:
  Tokenizer();
  Status load_roles(const std::string& config_path);
  bool skipped(std::string_view token, bool skip_special_tokens) const;

  std::unique_ptr<tok::BpeModel> model_;
  std::unique_ptr<tok::AddedVocabulary> added_;
  std::unique_ptr<tok::Normalizer> normalizer_;
  std::unique_ptr<tok::PreTokenizer> pre_tokenizer_;
  std::unique_ptr<tok::PostProcessor> post_processor_;
  std::unique_ptr<tok::Decoder> decoder_;
  int32_t vocab_size_ = 0;
  TokenizerRoles roles_;
};

}  // namespace m2::text
