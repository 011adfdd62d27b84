// UTF-8 helpers of the tokenizer. Encoding works on text already validated
// once at the entry point (Tokenizer::encode), so the hot decoders here
// assume well-formed input; decoding ids produces arbitrary bytes, which
// utf8_lossy turns into text exactly like Rust's String::from_utf8_lossy.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace m2::text::tok {

// Length of the sequence a lead byte starts (1 for a stray continuation byte).
inline size_t utf8_sequence_length(unsigned char lead) {
  if (lead < 0x80) return 1;
  if (lead < 0xE0) return lead < 0xC0 ? 1 : 2;
  return lead < 0xF0 ? 3 : 4;
}

// Decodes the code point at s[i] of well-formed UTF-8 and advances i.
inline char32_t next_codepoint(std::string_view s, size_t& i) {
  const auto b0 = static_cast<unsigned char>(s[i]);
  if (b0 < 0x80) {
    ++i;
    return b0;
  }
  const size_t n = utf8_sequence_length(b0);
  char32_t c = b0 & (0xFF >> (n + 1));
  for (size_t k = 1; k < n; ++k) c = (c << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3F);
  i += n;
  return c;
}

// Decodes the code point that ends at s[i - 1] and moves i back to its start.
inline char32_t prev_codepoint(std::string_view s, size_t& i) {
  size_t start = i - 1;
  while (start > 0 && (static_cast<unsigned char>(s[start]) & 0xC0) == 0x80) --start;
  size_t j = start;
  char32_t c = next_codepoint(s, j);
  i = start;
  return c;
}

inline void append_utf8(std::string& out, char32_t c) {
  if (c < 0x80) {
    out += static_cast<char>(c);
  } else if (c < 0x800) {
    out += static_cast<char>(0xC0 | (c >> 6));
    out += static_cast<char>(0x80 | (c & 0x3F));
  } else if (c < 0x10000) {
    out += static_cast<char>(0xE0 | (c >> 12));
    out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (c & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (c >> 18));
    out += static_cast<char>(0x80 | ((c >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (c & 0x3F));
  }
}

// Length of the well-formed sequence at bytes[i] (Unicode Table 3-7), or 0
// if it is ill-formed; `*valid_prefix` (if given) receives the length of the
// longest prefix that could still become well-formed (the "maximal subpart").
size_t well_formed_length(std::string_view bytes, size_t i, size_t* valid_prefix = nullptr);

// Byte offset of the first ill-formed sequence, or std::string_view::npos.
size_t find_invalid_utf8(std::string_view bytes);

// Every maximal ill-formed subpart replaced by U+FFFD, as from_utf8_lossy.
std::string utf8_lossy(std::string_view bytes);

}  // namespace m2::text::tok
