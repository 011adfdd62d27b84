// tokenizer.json pre-tokenizers: Split (every behavior, invert), ByteLevel
// (add_prefix_space, use_regex), Digits, Metaspace, Whitespace,
// WhitespaceSplit, CharDelimiterSplit and Sequence, with HF's semantics:
// each one maps every current piece to sub-pieces, empty pieces vanish.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "text/tokenizer/component_json.h"

namespace m2::text::tok {

// The pieces of one text segment: byte spans into `text`.
struct PieceList {
  struct Piece {
    uint32_t begin;
    uint32_t end;
    bool at_input_start;  // begins the encoded input (Metaspace "first")
  };
  std::string text;
  std::vector<Piece> pieces;

  std::string_view view(const Piece& p) const { return std::string_view(text).substr(p.begin, p.end - p.begin); }
};

class PreTokenizer {
 public:
  virtual ~PreTokenizer() = default;
  virtual Status apply(PieceList& pieces) const = 0;
  // Metaspace with prepend_scheme "first" (needs piece offsets).
  virtual bool uses_first_scheme() const { return false; }
};

Result<std::unique_ptr<PreTokenizer>> make_pre_tokenizer(const JsonNode& node);

// How a split keeps the delimiters (HF SplitDelimiterBehavior).
enum class SplitBehavior { kRemoved, kIsolated, kMergedWithPrevious, kMergedWithNext, kContiguous };

// HF's NormalizedString::split over a text of `length` bytes whose
// delimiter matches are `matches` (sorted, disjoint): the kept spans, in order.
void split_spans(size_t length, const std::vector<std::pair<size_t, size_t>>& matches, bool invert,
                 SplitBehavior behavior, std::vector<std::pair<size_t, size_t>>& out);

}  // namespace m2::text::tok
