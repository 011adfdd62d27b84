// GPT-2's byte-level alphabet: each of the 256 bytes is shown as a printable
// character (printable Latin-1 bytes as themselves, the others as U+0100..
// U+0143), so that any byte string is a string of vocabulary characters.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace m2::text::tok {

class ByteLevelAlphabet {
 public:
  static const ByteLevelAlphabet& get();

  char32_t char_of(uint8_t byte) const { return chars_[byte]; }
  // UTF-8 of char_of(byte).
  std::string_view utf8_of(uint8_t byte) const { return {utf8_[byte].data(), utf8_len_[byte]}; }
  // The byte a character stands for, if it is one of the 256.
  std::optional<uint8_t> byte_of(char32_t c) const {
    if (c < byte_of_.size() && byte_of_[c] >= 0) return static_cast<uint8_t>(byte_of_[c]);
    return std::nullopt;
  }

  // Appends the alphabet form of raw bytes.
  void encode(std::string_view bytes, std::string& out) const;
  // The bytes a token stands for: its characters mapped back if all are in
  // the alphabet, else the token's own UTF-8 (HF's ByteLevel decoder rule).
  void decode_token(std::string_view token, std::string& out) const;

 private:
  ByteLevelAlphabet();
  std::array<char32_t, 256> chars_{};
  std::array<std::array<char, 2>, 256> utf8_{};
  std::array<uint8_t, 256> utf8_len_{};
  std::array<int16_t, 0x144> byte_of_{};
};

}  // namespace m2::text::tok
