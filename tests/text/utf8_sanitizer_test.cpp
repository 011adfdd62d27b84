// UTF-8 sanitizing, whole and streamed, against Python's
// bytes.decode("utf-8", errors="replace") (expected values printed by it).
#include "text/utf8_sanitizer.h"

#include <gtest/gtest.h>

namespace m2::text {
namespace {

constexpr std::string_view kFffd = "\xEF\xBF\xBD";

TEST(Utf8Sanitizer, ReplacesMaximalSubparts) {
  const std::string r(kFffd);
  EXPECT_EQ(sanitize_utf8("abc é 😀"), "abc é 😀");
  EXPECT_EQ(sanitize_utf8("\xFF"), r);
  EXPECT_EQ(sanitize_utf8("\xC0\x80"), r + r);               // overlong lead bytes
  EXPECT_EQ(sanitize_utf8("\xE0\x80\x80"), r + r + r);       // overlong 3-byte
  EXPECT_EQ(sanitize_utf8("\xED\xA0\x80"), r + r + r);       // surrogate
  EXPECT_EQ(sanitize_utf8("\xF0\x9F\x98"), r);               // cut 4-byte: one replacement
  EXPECT_EQ(sanitize_utf8("\xF0\x9F\x98" "A"), r + "A");
  EXPECT_EQ(sanitize_utf8("\xF4\x90\x80\x80"), r + r + r + r);  // above U+10FFFF
  EXPECT_EQ(sanitize_utf8("\xE2\x82" "\xE2\x82\xAC"), r + "€");
}

TEST(Utf8Sanitizer, StreamEqualsWhole) {
  const std::string input = "a\xF0\x9F\x98\x80\xE2\x82\xAC\xFF\xE2\x82" "b\xC3\xA9\xF0\x9F\x98";
  for (size_t size = 1; size <= input.size(); ++size) {
    Utf8StreamSanitizer s;
    std::string out;
    for (size_t i = 0; i < input.size(); i += size) {
      const std::string piece = s.feed(std::string_view(input).substr(i, size));
      EXPECT_EQ(sanitize_utf8(piece), piece) << "a piece must be valid UTF-8";
      out += piece;
    }
    out += s.finish();
    EXPECT_EQ(out, sanitize_utf8(input)) << size;
  }
}

}  // namespace
}  // namespace m2::text
