// The BPE model of tokenizer.json ("model": {"type": "BPE", ...}) with HF
// tokenizers' semantics: a pre-token's characters become vocabulary ids
// (with continuing_subword_prefix / end_of_word_suffix, byte_fallback to
// <0xXX> tokens, unk_token and fuse_unk; unknown characters without either
// are dropped, as HF drops them), then the pair of lowest merge rank is
// merged, leftmost first, until no pair has a merge. ignore_merges returns
// a pre-token found whole in the vocabulary as one token.
//
// Thread-safe: tokenize() is const and keeps its scratch state per thread;
// a bounded per-model cache of recent pre-tokens is shared under a lock.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "text/tokenizer/hash_maps.h"
#include "util/status.h"

namespace m2::text::tok {

struct BpeOptions {
  std::optional<std::string> unk_token;
  std::string continuing_subword_prefix;
  std::string end_of_word_suffix;
  bool fuse_unk = false;
  bool byte_fallback = false;
  bool ignore_merges = false;
};

class BpeCache;

class BpeModel {
 public:
  // vocab: (token, id) in file order; merges: (left, right) by rank.
  static Result<std::unique_ptr<BpeModel>> create(std::vector<std::pair<std::string, int32_t>> vocab,
                                                  std::vector<std::pair<std::string, std::string>> merges,
                                                  BpeOptions options);
  ~BpeModel();

  // Appends the ids of one pre-token (valid UTF-8).
  Status tokenize(std::string_view word, std::vector<int32_t>& out) const;

  std::optional<int32_t> token_to_id(std::string_view token) const { return vocab_.find(token); }
  // The token of `id`, or nullopt if the vocabulary has no such id.
  std::optional<std::string_view> id_to_token(int32_t id) const;
  // Number of vocabulary entries (HF's get_vocab_size: ids may have gaps).
  size_t vocab_count() const { return vocab_.size(); }
  int32_t max_id() const { return static_cast<int32_t>(id_to_token_.size()) - 1; }
  const BpeOptions& options() const { return options_; }

 private:
  BpeModel() = default;
  Status initial_symbols(std::string_view word, std::vector<int32_t>& ids) const;
  Result<int32_t> unk_id() const;

  StringIdMap vocab_;
  PairMap merges_;
  std::vector<std::pair<uint32_t, uint32_t>> id_to_token_;  // (offset, length) in token_bytes_; length ~0u = no token
  std::string token_bytes_;
  std::vector<int32_t> small_char_ids_;     // id of the 1-character token for code points < 0x800, or -1
  std::vector<int32_t> byte_fallback_ids_;  // id of "<0xXX>" per byte, or -1
  BpeOptions options_;
  std::unique_ptr<BpeCache> cache_;
};

// Merge loops (bpe_merge.cpp), exposed for tests: both give HF's result;
// merge_by_scan hands inputs over 64 symbols to merge_by_heap.
namespace bpe_detail {
void merge_by_scan(const PairMap& merges, std::vector<int32_t>& ids);
void merge_by_heap(const PairMap& merges, std::vector<int32_t>& ids);
}  // namespace bpe_detail

}  // namespace m2::text::tok
