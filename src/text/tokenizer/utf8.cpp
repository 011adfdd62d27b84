#include "text/tokenizer/utf8.h"

namespace m2::text::tok {

size_t well_formed_length(std::string_view bytes, size_t i, size_t* valid_prefix) {
  const size_t n = bytes.size();
  const auto at = [&](size_t k) { return static_cast<unsigned char>(bytes[k]); };
  const unsigned char b0 = at(i);
  size_t need;
  unsigned char lo = 0x80, hi = 0xBF;  // allowed range of the second byte
  if (b0 < 0x80) {
    if (valid_prefix) *valid_prefix = 1;
    return 1;
  } else if (b0 >= 0xC2 && b0 <= 0xDF) {
    need = 2;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    need = 3;
    if (b0 == 0xE0) lo = 0xA0;
    if (b0 == 0xED) hi = 0x9F;  // no surrogates
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    need = 4;
    if (b0 == 0xF0) lo = 0x90;
    if (b0 == 0xF4) hi = 0x8F;
  } else {
    if (valid_prefix) *valid_prefix = 0;
    return 0;
  }
  size_t k = 1;
  for (; k < need && i + k < n; ++k) {
    const unsigned char b = at(i + k);
    const bool ok = k == 1 ? (b >= lo && b <= hi) : (b >= 0x80 && b <= 0xBF);
    if (!ok) break;
  }
  if (valid_prefix) *valid_prefix = k;
  return k == need ? need : 0;
}

size_t find_invalid_utf8(std::string_view bytes) {
  size_t i = 0;
  while (i < bytes.size()) {
    if (static_cast<unsigned char>(bytes[i]) < 0x80) {
      ++i;
      continue;
    }
    const size_t len = well_formed_length(bytes, i);
    if (len == 0) return i;
    i += len;
  }
  return std::string_view::npos;
}

std::string utf8_lossy(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size());
  size_t i = 0;
  while (i < bytes.size()) {
    if (static_cast<unsigned char>(bytes[i]) < 0x80) {
      out += bytes[i++];
      continue;
    }
    size_t prefix = 0;
    const size_t len = well_formed_length(bytes, i, &prefix);
    if (len) {
      out.append(bytes.substr(i, len));
      i += len;
    } else {
      out += "\xEF\xBF\xBD";
      i += prefix ? prefix : 1;  // the maximal subpart, at least one byte
    }
  }
  return out;
}

}  // namespace m2::text::tok
