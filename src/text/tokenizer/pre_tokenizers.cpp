#include "text/tokenizer/pre_tokenizers.h"

#include "text/tokenizer/byte_level.h"
#include "text/tokenizer/regex.h"
#include "text/tokenizer/unicode_sets.h"
#include "text/tokenizer/utf8.h"

namespace m2::text::tok {

void split_spans(size_t length, const std::vector<std::pair<size_t, size_t>>& matches, bool invert,
                 SplitBehavior behavior, std::vector<std::pair<size_t, size_t>>& out) {
  struct Span {
    size_t begin, end;
    bool is_match;
  };
  // find_matches: the text cut into matched and unmatched spans.
  std::vector<Span> spans;
  if (length == 0) {
    spans.push_back({0, 0, false});
  } else {
    size_t prev = 0;
    for (const auto& [s, e] : matches) {
      if (prev != s) spans.push_back({prev, s, false});
      spans.push_back({s, e, true});
      prev = e;
    }
    if (prev != length) spans.push_back({prev, length, false});
  }
  if (invert) {
    for (auto& s : spans) s.is_match = !s.is_match;
  }
  // (span, remove) per behavior, folded exactly as HF does.
  std::vector<std::pair<Span, bool>> result;
  bool previous_match = false;
  switch (behavior) {
    case SplitBehavior::kIsolated:
      for (const auto& s : spans) result.push_back({s, false});
      break;
    case SplitBehavior::kRemoved:
      for (const auto& s : spans) result.push_back({s, s.is_match});
      break;
    case SplitBehavior::kContiguous:
      for (const auto& s : spans) {
        if (s.is_match == previous_match && !result.empty()) {
          result.back().first.end = s.end;
        } else {
          result.push_back({s, false});
        }
        previous_match = s.is_match;
      }
      break;
    case SplitBehavior::kMergedWithPrevious:
      for (const auto& s : spans) {
        if (s.is_match && !previous_match && !result.empty()) {
          result.back().first.end = s.end;
        } else {
          result.push_back({s, false});
        }
        previous_match = s.is_match;
      }
      break;
    case SplitBehavior::kMergedWithNext:
      for (auto it = spans.rbegin(); it != spans.rend(); ++it) {
        if (it->is_match && !previous_match && !result.empty()) {
          result.back().first.begin = it->begin;
        } else {
          result.push_back({*it, false});
        }
        previous_match = it->is_match;
      }
      std::reverse(result.begin(), result.end());
      break;
  }
  for (const auto& [s, remove] : result) {
    if (!remove && s.end > s.begin) out.emplace_back(s.begin, s.end);
  }
}

namespace {

// Applies a per-piece splitter (matches relative to the piece) to every piece.
template <typename FindMatches>
Status split_each(PieceList& list, bool invert, SplitBehavior behavior, FindMatches&& find) {
  std::vector<PieceList::Piece> out;
  out.reserve(list.pieces.size() * 2);
  std::vector<std::pair<size_t, size_t>> matches, spans;
  for (const auto& p : list.pieces) {
    matches.clear();
    spans.clear();
    M2_RETURN_IF_ERROR(find(list.view(p), matches));
    split_spans(p.end - p.begin, matches, invert, behavior, spans);
    for (const auto& [b, e] : spans) {
      out.push_back(
          {static_cast<uint32_t>(p.begin + b), static_cast<uint32_t>(p.begin + e), p.at_input_start && b == 0});
    }
  }
  list.pieces = std::move(out);
  return {};
}

// Every character for which pred holds is a match of its own.
template <typename Pred>
Status char_matches(std::string_view text, std::vector<std::pair<size_t, size_t>>& out, Pred&& pred) {
  for (size_t i = 0; i < text.size();) {
    const size_t start = i;
    if (pred(next_codepoint(text, i))) out.emplace_back(start, i);
  }
  return {};
}

// Rewrites every piece through `fn(piece, out)` into a new buffer.
template <typename Fn>
void rebuild(PieceList& list, Fn&& fn) {
  std::string text;
  text.reserve(list.text.size() + list.text.size() / 2);
  for (auto& p : list.pieces) {
    const auto begin = static_cast<uint32_t>(text.size());
    fn(list.view(p), text);
    p.begin = begin;
    p.end = static_cast<uint32_t>(text.size());
  }
  list.text = std::move(text);
}

class Split final : public PreTokenizer {
 public:
  Split(std::unique_ptr<Regex> regex, SplitBehavior behavior, bool invert)
      : regex_(std::move(regex)), behavior_(behavior), invert_(invert) {}
  Status apply(PieceList& list) const override {
    return split_each(list, invert_, behavior_,
                      [&](std::string_view t, auto& out) { return regex_->find_all(t, out); });
  }

 private:
  std::unique_ptr<Regex> regex_;
  SplitBehavior behavior_;
  bool invert_;
};

class ByteLevel final : public PreTokenizer {
 public:
  ByteLevel(bool add_prefix_space, std::unique_ptr<Regex> gpt2)
      : add_prefix_space_(add_prefix_space), gpt2_(std::move(gpt2)) {}
  Status apply(PieceList& list) const override {
    if (add_prefix_space_) {
      rebuild(list, [](std::string_view piece, std::string& out) {
        if (piece[0] != ' ') out += ' ';
        out += piece;
      });
    }
    if (gpt2_) {
      M2_RETURN_IF_ERROR(split_each(list, false, SplitBehavior::kIsolated,
                                    [&](std::string_view t, auto& out) { return gpt2_->find_all(t, out); }));
    }
    const ByteLevelAlphabet& alphabet = ByteLevelAlphabet::get();
    rebuild(list, [&](std::string_view piece, std::string& out) { alphabet.encode(piece, out); });
    return {};
  }

 private:
  bool add_prefix_space_;
  std::unique_ptr<Regex> gpt2_;  // null when use_regex is false
};

class Digits final : public PreTokenizer {
 public:
  explicit Digits(bool individual) : individual_(individual) {}
  Status apply(PieceList& list) const override {
    const auto& numeric = rust_numeric_set();
    return split_each(list, false, individual_ ? SplitBehavior::kIsolated : SplitBehavior::kContiguous,
                      [&](std::string_view t, auto& out) {
                        return char_matches(t, out, [&](char32_t c) { return numeric.contains(c); });
                      });
  }

 private:
  bool individual_;
};

// Splits on one code point set (Removed): WhitespaceSplit, CharDelimiterSplit.
class CharSplit final : public PreTokenizer {
 public:
  explicit CharSplit(CodepointSet delimiters) : delimiters_(std::move(delimiters)) {}
  Status apply(PieceList& list) const override {
    return split_each(list, false, SplitBehavior::kRemoved, [&](std::string_view t, auto& out) {
      return char_matches(t, out, [&](char32_t c) { return delimiters_.contains(c); });
    });
  }

 private:
  CodepointSet delimiters_;
};

// HF's Whitespace: the matches of \w+|[^\w\s]+ kept, the rest dropped. It
// uses the Rust regex crate, not Oniguruma, hence that crate's \w (with
// Join_Control, without the Latin-1 superscripts Oniguruma counts).
class Whitespace final : public PreTokenizer {
 public:
  Status apply(PieceList& list) const override {
    const auto& word = regex_word_set();
    const auto& space = white_space_set();
    return split_each(list, true, SplitBehavior::kRemoved, [&](std::string_view t, auto& out) {
      for (size_t i = 0; i < t.size();) {
        const size_t start = i;
        const char32_t c = next_codepoint(t, i);
        if (space.contains(c)) continue;
        const bool in_word = word.contains(c);
        size_t end = i;
        while (end < t.size()) {
          size_t next = end;
          const char32_t d = next_codepoint(t, next);
          if (in_word ? !word.contains(d) : (word.contains(d) || space.contains(d))) break;
          end = next;
        }
        out.emplace_back(start, end);
        i = end;
      }
      return Status();
    });
  }
};

enum class PrependScheme { kAlways, kNever, kFirst };

class Metaspace final : public PreTokenizer {
 public:
  Metaspace(char32_t replacement, PrependScheme scheme, bool split)
      : replacement_(replacement), scheme_(scheme), split_(split) {
    append_utf8(replacement_utf8_, replacement);
  }
  Status apply(PieceList& list) const override {
    std::string text;
    text.reserve(list.text.size() + list.pieces.size() * replacement_utf8_.size());
    for (auto& p : list.pieces) {
      const std::string_view piece = list.view(p);
      const auto begin = static_cast<uint32_t>(text.size());
      // Once ' ' becomes the replacement, the piece starts with the
      // replacement iff it starts with a space or with the replacement.
      const bool starts = piece[0] == ' ' || piece.starts_with(replacement_utf8_);
      if (!starts && (scheme_ == PrependScheme::kAlways || (scheme_ == PrependScheme::kFirst && p.at_input_start))) {
        text += replacement_utf8_;
      }
      for (char ch : piece) {
        if (ch == ' ') {
          text += replacement_utf8_;
        } else {
          text += ch;
        }
      }
      p.begin = begin;
      p.end = static_cast<uint32_t>(text.size());
    }
    list.text = std::move(text);
    if (!split_) return {};
    const char32_t r = replacement_;
    return split_each(list, false, SplitBehavior::kMergedWithNext, [r](std::string_view t, auto& out) {
      return char_matches(t, out, [r](char32_t c) { return c == r; });
    });
  }
  bool uses_first_scheme() const override { return scheme_ == PrependScheme::kFirst; }

 private:
  char32_t replacement_;
  std::string replacement_utf8_;
  PrependScheme scheme_;
  bool split_;
};

class SequencePreTokenizer final : public PreTokenizer {
 public:
  explicit SequencePreTokenizer(std::vector<std::unique_ptr<PreTokenizer>> steps) : steps_(std::move(steps)) {}
  Status apply(PieceList& list) const override {
    for (const auto& s : steps_) M2_RETURN_IF_ERROR(s->apply(list));
    return {};
  }
  bool uses_first_scheme() const override {
    for (const auto& s : steps_) {
      if (s->uses_first_scheme()) return true;
    }
    return false;
  }

 private:
  std::vector<std::unique_ptr<PreTokenizer>> steps_;
};

Result<SplitBehavior> parse_behavior(const JsonNode& node) {
  M2_ASSIGN_OR_RETURN(std::string b, node.string_field("behavior"));
  if (b == "Removed") return SplitBehavior::kRemoved;
  if (b == "Isolated") return SplitBehavior::kIsolated;
  if (b == "MergedWithPrevious") return SplitBehavior::kMergedWithPrevious;
  if (b == "MergedWithNext") return SplitBehavior::kMergedWithNext;
  if (b == "Contiguous") return SplitBehavior::kContiguous;
  return errorf("{}: unknown behavior '{}'", node.child_path("behavior"), b);
}

Result<char32_t> single_char(const JsonNode& node, std::string_view key) {
  M2_ASSIGN_OR_RETURN(std::string s, node.string_field(key));
  size_t i = 0;
  if (s.empty() || find_invalid_utf8(s) != std::string::npos)
    return errorf("{}: expected one character", node.child_path(key));
  const char32_t c = next_codepoint(s, i);
  if (i != s.size()) return errorf("{}: expected one character, got '{}'", node.child_path(key), s);
  return c;
}

constexpr std::string_view kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

}  // namespace

Result<std::unique_ptr<PreTokenizer>> make_pre_tokenizer(const JsonNode& node) {
  M2_ASSIGN_OR_RETURN(std::string type, node.type_name());
  if (type == "Split") {
    M2_RETURN_IF_ERROR(node.only_keys({"type", "pattern", "behavior", "invert"}));
    if (!node.has("pattern")) return node.error("missing pattern");
    M2_ASSIGN_OR_RETURN(auto regex, make_pattern(node.child("pattern")));
    M2_ASSIGN_OR_RETURN(SplitBehavior behavior, parse_behavior(node));
    M2_ASSIGN_OR_RETURN(bool invert, node.bool_field("invert", false));
    return std::unique_ptr<PreTokenizer>(new Split(std::move(regex), behavior, invert));
  }
  if (type == "ByteLevel") {
    M2_RETURN_IF_ERROR(node.only_keys({"type", "add_prefix_space", "trim_offsets", "use_regex"}));
    M2_ASSIGN_OR_RETURN(bool prefix, node.bool_field("add_prefix_space", true));
    M2_ASSIGN_OR_RETURN(bool use_regex, node.bool_field("use_regex", true));
    std::unique_ptr<Regex> gpt2;
    if (use_regex) {
      M2_ASSIGN_OR_RETURN(gpt2, Regex::from_onig(kGpt2Pattern));
    }
    return std::unique_ptr<PreTokenizer>(new ByteLevel(prefix, std::move(gpt2)));
  }
  if (type == "Digits") {
    M2_RETURN_IF_ERROR(node.only_keys({"type", "individual_digits"}));
    M2_ASSIGN_OR_RETURN(bool individual, node.bool_field("individual_digits", false));
    return std::unique_ptr<PreTokenizer>(new Digits(individual));
  }
  if (type == "Whitespace") {
    M2_RETURN_IF_ERROR(node.only_keys({"type"}));
    return std::unique_ptr<PreTokenizer>(new Whitespace());
  }
  if (type == "WhitespaceSplit") {
    M2_RETURN_IF_ERROR(node.only_keys({"type"}));
    return std::unique_ptr<PreTokenizer>(new CharSplit(white_space_set()));
  }
  if (type == "CharDelimiterSplit") {
    M2_RETURN_IF_ERROR(node.only_keys({"type", "delimiter"}));
    M2_ASSIGN_OR_RETURN(char32_t c, single_char(node, "delimiter"));
    const CodepointRange r{c, c};
    return std::unique_ptr<PreTokenizer>(new CharSplit(CodepointSet::from_ranges({&r, 1})));
  }
  if (type == "Metaspace") {
    M2_RETURN_IF_ERROR(
        node.only_keys({"type", "replacement", "prepend_scheme", "split", "add_prefix_space", "str_rep"}));
    M2_ASSIGN_OR_RETURN(char32_t replacement, single_char(node, "replacement"));
    PrependScheme scheme = PrependScheme::kAlways;
    if (node.has("prepend_scheme")) {
      M2_ASSIGN_OR_RETURN(std::string s, node.string_field("prepend_scheme"));
      if (s == "always") {
        scheme = PrependScheme::kAlways;
      } else if (s == "never") {
        scheme = PrependScheme::kNever;
      } else if (s == "first") {
        scheme = PrependScheme::kFirst;
      } else {
        return errorf("{}: unknown prepend_scheme '{}'", node.child_path("prepend_scheme"), s);
      }
    } else if (node.has("add_prefix_space")) {  // legacy form
      M2_ASSIGN_OR_RETURN(bool prefix, node.bool_field("add_prefix_space"));
      scheme = prefix ? PrependScheme::kAlways : PrependScheme::kNever;
    }
    M2_ASSIGN_OR_RETURN(bool split, node.bool_field("split", true));
    return std::unique_ptr<PreTokenizer>(new Metaspace(replacement, scheme, split));
  }
  if (type == "Sequence") {
    M2_ASSIGN_OR_RETURN(auto steps, component_sequence<PreTokenizer>(node, "pretokenizers", make_pre_tokenizer));
    return std::unique_ptr<PreTokenizer>(new SequencePreTokenizer(std::move(steps)));
  }
  return node.error(
      fmt::format("unsupported pre-tokenizer type '{}' (supported: Split, ByteLevel, Digits, Metaspace, "
                  "Whitespace, WhitespaceSplit, CharDelimiterSplit, Sequence)",
                  type));
}

}  // namespace m2::text::tok
