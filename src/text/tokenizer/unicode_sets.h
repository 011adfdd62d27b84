// Sets of code points and the category / case queries built on the
// generated tables (unicode_data.h): what HF's regexes, Digits, single_word,
// lstrip/rstrip and Lowercase consider a letter, digit, word or space.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "text/tokenizer/unicode_data.h"

namespace m2::text::tok {

// Bit i set = GeneralCategory i is included.
using CategoryMask = uint32_t;
constexpr CategoryMask category_bit(GeneralCategory c) { return CategoryMask{1} << static_cast<int>(c); }

GeneralCategory general_category(char32_t c);

// Declared before CodepointSet::operator== uses it: clang looks it up there
// (GCC only where the comparison is instantiated, after the class).
inline bool operator==(const CodepointRange& a, const CodepointRange& b) {
  return a.first == b.first && a.last == b.last;
}

// Sorted, disjoint, non-adjacent inclusive ranges; membership in O(log n)
// with an ASCII bitmap in front.
class CodepointSet {
 public:
  CodepointSet() = default;
  static CodepointSet from_ranges(std::span<const CodepointRange> ranges);
  static CodepointSet of_categories(CategoryMask mask);

  bool contains(char32_t c) const {
    if (c < 128) return (ascii_[c >> 6] >> (c & 63)) & 1;
    return contains_slow(c);
  }
  CodepointSet unite(const CodepointSet& other) const;
  CodepointSet subtract(const CodepointSet& other) const;
  CodepointSet complement() const;  // within [0, 0x10FFFF], surrogates included
  const std::vector<CodepointRange>& ranges() const { return ranges_; }
  size_t size() const;  // number of code points
  bool operator==(const CodepointSet& other) const { return ranges_ == other.ranges_; }

 private:
  explicit CodepointSet(std::vector<CodepointRange> ranges);
  bool contains_slow(char32_t c) const;
  std::vector<CodepointRange> ranges_;
  uint64_t ascii_[2] = {0, 0};
};

// The sets HF uses, each built once on first use (thread-safe).
const CodepointSet& white_space_set();                // Oniguruma \s, char::is_whitespace, regex \s
const CodepointSet& rust_numeric_set();               // char::is_numeric (Digits pre-tokenizer)
const CodepointSet& regex_word_set();                 // Rust regex \w (added tokens' single_word)
const CodepointSet& onig_word_set();                  // Oniguruma \w
const CodepointSet& category_set(CategoryMask mask);  // cached per mask

// Appends char::to_lowercase(c) as UTF-8 (U+0130 gives two code points).
void append_lowercase(char32_t c, std::string& out);

}  // namespace m2::text::tok
