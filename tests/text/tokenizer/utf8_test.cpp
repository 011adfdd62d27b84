// UTF-8 helpers: validation offsets and Rust from_utf8_lossy replacement
// (Unicode "maximal subpart" practice, Unicode Standard 3.9, Table 3-8).
#include "text/tokenizer/utf8.h"

#include <gtest/gtest.h>

namespace m2::text::tok {
namespace {

const std::string kFffd = "\xEF\xBF\xBD";

TEST(Utf8, LossyFollowsTheMaximalSubpartPractice) {
  // Table 3-8 of the Unicode Standard: 61 F1 80 80 E1 80 C2 62 80 63 80 BF 64.
  const std::string in = "\x61\xF1\x80\x80\xE1\x80\xC2\x62\x80\x63\x80\xBF\x64";
  EXPECT_EQ(utf8_lossy(in), "a" + kFffd + kFffd + kFffd + "b" + kFffd + "c" + kFffd + kFffd + "d");
}

TEST(Utf8, LossyKeepsValidTextAndReplacesEachBadByteOfSurrogatesAndOverlongs) {
  EXPECT_EQ(utf8_lossy("h\xC3\xA9llo \xF0\x9F\x98\x80"), "h\xC3\xA9llo \xF0\x9F\x98\x80");
  EXPECT_EQ(utf8_lossy("\xED\xA0\x80"), kFffd + kFffd + kFffd);              // a surrogate: E0..9F rule
  EXPECT_EQ(utf8_lossy("\xC0\xAF"), kFffd + kFffd);                          // overlong '/'
  EXPECT_EQ(utf8_lossy("\xF4\x90\x80\x80"), kFffd + kFffd + kFffd + kFffd);  // beyond U+10FFFF
  EXPECT_EQ(utf8_lossy("\xF0\x9F\x98"), kFffd);                              // truncated: one subpart
  EXPECT_EQ(utf8_lossy("\xE2\x82"), kFffd);
  EXPECT_EQ(utf8_lossy(std::string("a\0b", 3)), std::string("a\0b", 3));
}

TEST(Utf8, FindInvalidNamesTheFirstBadOffset) {
  EXPECT_EQ(find_invalid_utf8("plain ascii"), std::string_view::npos);
  EXPECT_EQ(find_invalid_utf8("\xE4\xBD\xA0\xE5\xA5\xBD"), std::string_view::npos);
  EXPECT_EQ(find_invalid_utf8("ab\xFF"), 2u);
  EXPECT_EQ(find_invalid_utf8("\xE4\xBD\xA0\xE5\xA5"), 3u);
}

TEST(Utf8, WellFormedLengthReportsTheValidPrefix) {
  size_t prefix = 0;
  EXPECT_EQ(well_formed_length("\xF0\x9F\x98\x80", 0, &prefix), 4u);
  EXPECT_EQ(well_formed_length("\xF0\x9F\x98", 0, &prefix), 0u);
  EXPECT_EQ(prefix, 3u);
  EXPECT_EQ(well_formed_length("\xE0\x80", 0, &prefix), 0u);  // E0 needs A0..BF next
  EXPECT_EQ(prefix, 1u);
}

TEST(Utf8, CodepointIterationBothWays) {
  const std::string s = "a\xC3\xA9\xE4\xBD\xA0\xF0\x9F\x98\x80";
  size_t i = 0;
  EXPECT_EQ(next_codepoint(s, i), U'a');
  EXPECT_EQ(next_codepoint(s, i), U'\u00E9');
  EXPECT_EQ(next_codepoint(s, i), U'\u4F60');
  EXPECT_EQ(next_codepoint(s, i), U'\U0001F600');
  EXPECT_EQ(i, s.size());
  EXPECT_EQ(prev_codepoint(s, i), U'\U0001F600');
  EXPECT_EQ(prev_codepoint(s, i), U'\u4F60');
  EXPECT_EQ(i, 3u);
  std::string out;
  for (char32_t c : {U'a', U'\u00E9', U'\u4F60', U'\U0001F600'}) append_utf8(out, c);
  EXPECT_EQ(out, s);
}

}  // namespace
}  // namespace m2::text::tok
