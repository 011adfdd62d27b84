#include "text/tokenizer/byte_level.h"

#include "text/tokenizer/utf8.h"

namespace m2::text::tok {

ByteLevelAlphabet::ByteLevelAlphabet() {
  byte_of_.fill(-1);
  int next = 0;
  for (int b = 0; b < 256; ++b) {
    const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
    const char32_t c = printable ? static_cast<char32_t>(b) : static_cast<char32_t>(256 + next++);
    chars_[b] = c;
    byte_of_[c] = static_cast<int16_t>(b);
    std::string s;
    append_utf8(s, c);
    utf8_len_[b] = static_cast<uint8_t>(s.size());
    for (size_t k = 0; k < s.size(); ++k) utf8_[b][k] = s[k];
  }
}

const ByteLevelAlphabet& ByteLevelAlphabet::get() {
  static const ByteLevelAlphabet alphabet;
  return alphabet;
}

void ByteLevelAlphabet::encode(std::string_view bytes, std::string& out) const {
  for (unsigned char b : bytes) out.append(utf8_[b].data(), utf8_len_[b]);
}

void ByteLevelAlphabet::decode_token(std::string_view token, std::string& out) const {
  const size_t mark = out.size();
  for (size_t i = 0; i < token.size();) {
    auto byte = byte_of(next_codepoint(token, i));
    if (!byte) {
      out.resize(mark);
      out.append(token);
      return;
    }
    out += static_cast<char>(*byte);
  }
}

}  // namespace m2::text::tok
