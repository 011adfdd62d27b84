#include "text/utf8_sanitizer.h"

#include <cstdint>

namespace m2::text {
namespace {

constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD

// Allowed range of the second byte of a sequence led by `lead` (Unicode
// Table 3-7); later continuation bytes are always 0x80..0xBF.
struct SecondByteRange {
  uint8_t lo, hi;
};

// Length of the well-formed sequence led by `lead`, 0 if `lead` never starts one.
int sequence_length(uint8_t lead, SecondByteRange* second) {
  *second = {0x80, 0xBF};
  if (lead < 0x80) return 1;
  if (lead >= 0xC2 && lead <= 0xDF) return 2;
  if (lead == 0xE0) { *second = {0xA0, 0xBF}; return 3; }
  if (lead >= 0xE1 && lead <= 0xEC) return 3;
  if (lead == 0xED) { *second = {0x80, 0x9F}; return 3; }  // no surrogates
  if (lead >= 0xEE && lead <= 0xEF) return 3;
  if (lead == 0xF0) { *second = {0x90, 0xBF}; return 4; }
  if (lead >= 0xF1 && lead <= 0xF3) return 4;
  if (lead == 0xF4) { *second = {0x80, 0x8F}; return 4; }  // <= U+10FFFF
  return 0;
}

// Appends the sanitized form of `bytes` to `out`. When `final` is false, an
// unfinished but so-far valid sequence at the end is not consumed; returns
// the number of bytes consumed.
size_t sanitize_into(std::string_view bytes, bool final, std::string* out) {
  size_t i = 0;
  const size_t n = bytes.size();
  while (i < n) {
    // Copy runs of ASCII at once: the common case.
    size_t ascii_end = i;
    while (ascii_end < n && static_cast<uint8_t>(bytes[ascii_end]) < 0x80) ++ascii_end;
    if (ascii_end > i) {
      out->append(bytes.substr(i, ascii_end - i));
      i = ascii_end;
      continue;
    }
    SecondByteRange second;
    const int len = sequence_length(static_cast<uint8_t>(bytes[i]), &second);
    if (len == 0) {
      out->append(kReplacement);
      ++i;
      continue;
    }
    // Count how many bytes of the sequence are present and valid.
    int valid = 1;
    while (valid < len && i + valid < n) {
      const auto c = static_cast<uint8_t>(bytes[i + valid]);
      const uint8_t lo = valid == 1 ? second.lo : 0x80;
      const uint8_t hi = valid == 1 ? second.hi : 0xBF;
      if (c < lo || c > hi) break;
      ++valid;
    }
    if (valid == len) {
      out->append(bytes.substr(i, len));
      i += len;
    } else if (i + valid == n && !final) {
      return i;  // unfinished character: wait for its remaining bytes
    } else {
      out->append(kReplacement);  // maximal subpart: the valid prefix
      i += valid;
    }
  }
  return i;
}

}  // namespace

std::string sanitize_utf8(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size());
  sanitize_into(bytes, /*final=*/true, &out);
  return out;
}

std::string Utf8StreamSanitizer::feed(std::string_view bytes) {
  std::string out;
  if (held_.empty()) {
    const size_t used = sanitize_into(bytes, /*final=*/false, &out);
    held_.assign(bytes.substr(used));
    return out;
  }
  held_.append(bytes);
  const size_t used = sanitize_into(held_, /*final=*/false, &out);
  held_.erase(0, used);
  return out;
}

std::string Utf8StreamSanitizer::finish() {
  std::string out;
  sanitize_into(held_, /*final=*/true, &out);
  held_.clear();
  return out;
}

}  // namespace m2::text
