// The added tokens of tokenizer.json ("added_tokens"), matched whole in the
// text before normalization / pre-tokenization, as HF's AddedVocabulary:
//
// - ids are assigned as HF assigns them when loading: a token already in
//   the vocabulary keeps its id, any other gets the next id after the
//   vocabulary (HF ignores the file's "id" there and warns if it differs;
//   so do we);
// - two matchers, leftmost-longest (Aho-Corasick semantics): tokens with
//   normalized=false on the raw text, then tokens with normalized=true, in
//   normalized form, on each normalized piece;
// - single_word: only between non-word characters (Rust regex \w);
//   lstrip / rstrip: the match swallows the White_Space before / after it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "text/tokenizer/component_json.h"

namespace m2::text::tok {

class BpeModel;
class Normalizer;

struct AddedToken {
  std::string content;
  bool single_word = false;
  bool lstrip = false;
  bool rstrip = false;
  bool normalized = true;
  bool special = false;
  bool operator==(const AddedToken&) const = default;
};

// A span of text: an added token (id >= 0) or text to tokenize (id < 0).
struct Segment {
  size_t begin;
  size_t end;
  int32_t id;
};

class AddedVocabulary {
 public:
  AddedVocabulary() = default;
  // `list` is the "added_tokens" array.
  static Result<AddedVocabulary> build(const JsonNode& list, const BpeModel& model, const Normalizer* normalizer);

  // Cuts `text` into segments with the raw (normalized=false) or the
  // normalized matcher. Segments cover the text; empty text -> nothing.
  void split(std::string_view text, bool normalized_matcher, std::vector<Segment>& out) const;

  std::optional<int32_t> token_to_id(std::string_view content) const;
  const AddedToken* token_of(int32_t id) const;
  // The token string of an id as HF decodes it: the content, normalized
  // if the token is `normalized` (HF quirk: skip_special_tokens compares
  // this string with the raw contents, so it may keep such a token).
  std::optional<std::string_view> text_of(int32_t id) const;
  int32_t max_id() const;

  // Contents of the special tokens: HF's skip_special_tokens drops any id
  // whose token string is one of these.
  struct StringHash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>()(s); }
  };
  using ContentSet = std::unordered_set<std::string, StringHash, std::equal_to<>>;
  const ContentSet& special_contents() const { return special_contents_; }

 private:
  // Byte trie over the patterns of one matcher.
  struct Matcher {
    struct Node {
      std::vector<std::pair<uint8_t, int32_t>> next;  // sorted by byte
      int32_t token_id = -1;                          // pattern ending here
    };
    std::vector<Node> nodes{Node{}};
    bool first_byte[256] = {};
    void add(std::string_view pattern, int32_t id);
    // Longest pattern starting at text[i]: (length, id) or (0, -1).
    std::pair<size_t, int32_t> longest_at(std::string_view text, size_t i) const;
  };
  void match(std::string_view text, const Matcher& m, std::vector<Segment>& out) const;

  std::unordered_map<std::string, int32_t> by_content_;
  ContentSet special_contents_;
  std::unordered_map<int32_t, AddedToken> by_id_;
  std::unordered_map<int32_t, std::string> text_by_id_;
  Matcher raw_, normalized_;
};

}  // namespace m2::text::tok
