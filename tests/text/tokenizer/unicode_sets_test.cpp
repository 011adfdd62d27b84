// The Unicode tables read back from HF tokenizers, and the sets built on them.
#include "text/tokenizer/unicode_sets.h"

#include <gtest/gtest.h>

namespace m2::text::tok {
namespace {

using enum GeneralCategory;

TEST(UnicodeSets, CategoryRunsCoverEveryCodePointInOrder) {
  const auto runs = unicode_data::kCategoryRuns;
  ASSERT_FALSE(runs.empty());
  EXPECT_EQ(runs[0].start, 0u);
  for (size_t i = 1; i < runs.size(); ++i) {
    EXPECT_LT(runs[i - 1].start, runs[i].start);
    EXPECT_NE(runs[i - 1].category, runs[i].category)
        << "adjacent runs must differ at " << static_cast<uint32_t>(runs[i].start);
  }
  EXPECT_LE(runs.back().start, 0x10FFFFu);
}

TEST(UnicodeSets, CategoriesAreOniguruma16) {
  EXPECT_EQ(general_category(U'A'), kLu);
  EXPECT_EQ(general_category(U'a'), kLl);
  EXPECT_EQ(general_category(U'0'), kNd);
  EXPECT_EQ(general_category(U' '), kZs);
  EXPECT_EQ(general_category(U'\u0301'), kMn);
  EXPECT_EQ(general_category(U'\u4E2D'), kLo);
  EXPECT_EQ(general_category(U'\U0001F600'), kSo);
  EXPECT_EQ(general_category(U'\u0378'), kCn);
  // Assigned in Unicode 16 (PCRE2 10.42 still has them unassigned).
  EXPECT_EQ(general_category(U'\u1C89'), kLu);
  EXPECT_EQ(general_category(U'\U000105C0'), kLo);
}

TEST(UnicodeSets, WhiteSpaceIsTheUnicodeProperty) {
  const auto& ws = white_space_set();
  EXPECT_EQ(ws.size(), 25u);
  for (char32_t c : {U'\t', U'\n', U'\v', U'\f', U'\r', U' ', U'\u0085', U'\u00A0', U'\u1680', U'\u2028', U'\u3000'}) {
    EXPECT_TRUE(ws.contains(c)) << static_cast<uint32_t>(c);
  }
  EXPECT_FALSE(ws.contains(U'\u180E'));  // PCRE2's \s has it, Unicode 6.3+ does not
  EXPECT_FALSE(ws.contains(U'\u200B'));
}

TEST(UnicodeSets, RustSetsAreNewerThanOniguruma) {
  EXPECT_TRUE(rust_numeric_set().contains(U'7'));
  EXPECT_TRUE(rust_numeric_set().contains(U'\u00BD'));      // No
  EXPECT_TRUE(rust_numeric_set().contains(U'\U00011DE0'));  // Unicode 17 digit
  EXPECT_FALSE(category_set(category_bit(kNd)).contains(U'\U00011DE0'));
  EXPECT_TRUE(regex_word_set().contains(U'\u200D'));  // Join_Control
  EXPECT_FALSE(regex_word_set().contains(U'\u00B2'));
  EXPECT_TRUE(onig_word_set().contains(U'\u00B2'));
  EXPECT_FALSE(onig_word_set().contains(U'\u200D'));
}

TEST(UnicodeSets, LowercaseIsCharToLowercase) {
  auto lower = [](char32_t c) {
    std::string s;
    append_lowercase(c, s);
    return s;
  };
  EXPECT_EQ(lower(U'A'), "a");
  EXPECT_EQ(lower(U'\u0130'), "i\xCC\x87");  // İ -> i + combining dot
  EXPECT_EQ(lower(U'\u03A3'), "\xCF\x83");   // Σ -> σ, never final ς
  EXPECT_EQ(lower(U'\u1E9E'), "\xC3\x9F");   // ẞ -> ß
  EXPECT_EQ(lower(U'a'), "a");
  EXPECT_EQ(lower(U'\u4E2D'), "\xE4\xB8\xAD");
}

TEST(UnicodeSets, SetAlgebra) {
  const CodepointRange a[] = {{10, 20}, {30, 40}};
  const CodepointRange b[] = {{15, 35}};
  const auto sa = CodepointSet::from_ranges(a), sb = CodepointSet::from_ranges(b);
  const std::vector<CodepointRange> uni = {{10, 40}};
  EXPECT_EQ(sa.unite(sb).ranges(), uni);
  const std::vector<CodepointRange> diff = {{10, 14}, {36, 40}};
  EXPECT_EQ(sa.subtract(sb).ranges(), diff);
  EXPECT_EQ(sa.complement().complement(), sa);
  EXPECT_EQ(sa.size(), 22u);
  EXPECT_TRUE(sa.contains(10));
  EXPECT_FALSE(sa.contains(25));
}

}  // namespace
}  // namespace m2::text::tok
