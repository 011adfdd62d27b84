// The Oniguruma -> PCRE2 translation: every Unicode class matches exactly
// the reference's code points (checked over the whole code space), HF's
// match iteration (empty matches), and refusal of what cannot be mirrored.
#include "text/tokenizer/regex.h"

#include <gtest/gtest.h>

#include "text/tokenizer/unicode_sets.h"
#include "text/tokenizer/utf8.h"

namespace m2::text::tok {
namespace {

using enum GeneralCategory;

// All code points but surrogates, and the code point at each byte offset.
struct AllCodepoints {
  std::string text;
  std::vector<char32_t> at;  // by byte offset (only starts are set)
  AllCodepoints() {
    at.reserve(4500000);
    for (char32_t c = 0; c <= 0x10FFFF; ++c) {
      if (c >= 0xD800 && c <= 0xDFFF) continue;
      const size_t before = text.size();
      append_utf8(text, c);
      at.resize(text.size(), 0);
      at[before] = c;
    }
  }
};

const AllCodepoints& all() {
  static const AllCodepoints a;
  return a;
}

// Runs `(?:pattern)+` over all code points and returns the first code
// point where the matches and `expected` disagree, or -1 (surrogates aside).
int64_t first_disagreement(const std::string& pattern, const CodepointSet& expected) {
  auto re = Regex::from_onig("(?:" + pattern + ")+");
  EXPECT_TRUE(re.ok()) << re.status().message();
  if (!re.ok()) return -2;
  std::vector<std::pair<size_t, size_t>> matches;
  EXPECT_TRUE((*re)->find_all(all().text, matches).ok());
  std::vector<CodepointRange> got;
  for (const auto& [s, e] : matches) {
    size_t last = e;
    const char32_t last_cp = prev_codepoint(all().text, last);
    got.push_back({all().at[s], last_cp});
  }
  const CodepointRange surrogates[] = {{0xD800, 0xDFFF}};
  const CodepointSet want = expected.subtract(CodepointSet::from_ranges(surrogates));
  const CodepointSet have = CodepointSet::from_ranges(got).subtract(CodepointSet::from_ranges(surrogates));
  if (have == want) return -1;
  const CodepointSet diff = have.subtract(want).unite(want.subtract(have));
  return diff.ranges().empty() ? -3 : static_cast<int64_t>(diff.ranges()[0].first);
}

TEST(RegexClasses, EveryCategoryMatchesTheTableExactly) {
  const char* names[] = {"Lu", "Ll", "Lt", "Lm", "Lo", "Mn", "Mc", "Me", "Nd", "Nl", "No", "Pc", "Pd", "Ps", "Pe",
                         "Pi", "Pf", "Po", "Sm", "Sc", "Sk", "So", "Zs", "Zl", "Zp", "Cc", "Cf", "Co", "Cn"};
  std::vector<std::pair<std::string, CategoryMask>> cases;
  for (int i = 0; i < 29; ++i) cases.emplace_back(names[i], CategoryMask{1} << i);
  auto group = [&](const char* name, std::initializer_list<GeneralCategory> members) {
    CategoryMask m = 0;
    for (auto c : members) m |= category_bit(c);
    cases.emplace_back(name, m);
  };
  group("L", {kLu, kLl, kLt, kLm, kLo});
  group("M", {kMn, kMc, kMe});
  group("N", {kNd, kNl, kNo});
  group("P", {kPc, kPd, kPs, kPe, kPi, kPf, kPo});
  group("S", {kSm, kSc, kSk, kSo});
  group("Z", {kZs, kZl, kZp});
  group("C", {kCc, kCf, kCo, kCn, kCs});
  const CodepointRange x_range[] = {{'x', 'x'}};
  const CodepointSet x = CodepointSet::from_ranges(x_range);
  for (const auto& [name, mask] : cases) {
    const CodepointSet& set = category_set(mask);
    EXPECT_EQ(first_disagreement(fmt::format("\\p{{{}}}", name), set), -1) << "\\p{" << name << "}";
    EXPECT_EQ(first_disagreement(fmt::format("[x\\p{{{}}}]", name), set.unite(x)), -1) << "[x\\p{" << name << "}]";
    EXPECT_EQ(first_disagreement(fmt::format("[^\\p{{{}}}]", name), set.complement()), -1) << "[^\\p{" << name << "}]";
    EXPECT_EQ(first_disagreement(fmt::format("\\P{{{}}}", name), set.complement()), -1) << "\\P{" << name << "}";
  }
}

TEST(RegexClasses, ShorthandsFollowOniguruma) {
  EXPECT_EQ(first_disagreement("\\s", white_space_set()), -1);
  EXPECT_EQ(first_disagreement("[^\\s]", white_space_set().complement()), -1);
  EXPECT_EQ(first_disagreement("\\d", category_set(category_bit(kNd))), -1);
  EXPECT_EQ(first_disagreement("\\w", onig_word_set()), -1);
  EXPECT_EQ(first_disagreement("[\\W]", onig_word_set().complement()), -1);
  const CodepointRange hex[] = {{'0', '9'}, {'A', 'F'}, {'a', 'f'}};
  EXPECT_EQ(first_disagreement("\\h", CodepointSet::from_ranges(hex)), -1);
  // The o200k "other" class: neither space, letter nor number.
  const auto lettnum = category_set(category_bit(kLu) | category_bit(kLl) | category_bit(kLt) | category_bit(kLm) |
                                    category_bit(kLo) | category_bit(kNd) | category_bit(kNl) | category_bit(kNo));
  EXPECT_EQ(first_disagreement("[^\\s\\p{L}\\p{N}]", lettnum.unite(white_space_set()).complement()), -1);
}

std::vector<std::string> pieces(const std::string& pattern, const std::string& text) {
  auto re = Regex::from_onig(pattern);
  EXPECT_TRUE(re.ok()) << re.status().message();
  std::vector<std::pair<size_t, size_t>> m;
  EXPECT_TRUE((*re)->find_all(text, m).ok());
  std::vector<std::string> out;
  for (const auto& [s, e] : m) out.push_back(text.substr(s, e - s));
  return out;
}

TEST(RegexIteration, EmptyMatchesFollowTheOnigCrate) {
  // find_iter of the onig crate: no empty match right after a match.
  EXPECT_EQ(pieces("\\s*", "a  b"), (std::vector<std::string>{"", "  ", ""}));
  EXPECT_EQ(pieces("x*", "axxb"), (std::vector<std::string>{"", "xx", ""}));
  EXPECT_EQ(pieces("", "ab"), (std::vector<std::string>{"", "", ""}));
  EXPECT_EQ(pieces("(?<=\\p{Ll})(?=\\p{Lu})", "camelCaseWord"), (std::vector<std::string>{"", ""}));
}

TEST(RegexIteration, O200kPatternPieces) {
  const std::string o200k =
      "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+(?i:'s|'t|'re|'ve|'m|'"
      "ll|'d)?"
      "|[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*(?i:'s|'t|'re|'ve|'m|'"
      "ll|'d)?"
      "|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
  EXPECT_EQ(pieces(o200k, "I'LL see you're 12345  \n\nok"),
            (std::vector<std::string>{"I'LL", " see", " you're", " ", "123", "45", "  \n\n", "ok"}));
  // U+1C89 is an uppercase letter only since Unicode 16 (PCRE2 alone
  // would glue it to the '.' as punctuation).
  EXPECT_EQ(pieces(o200k, "\u1C89."), (std::vector<std::string>{"\u1C89", "."}));
}

TEST(RegexTranslation, RewritesOnigurumaSyntax) {
  EXPECT_EQ(pieces("\\h+", "xDEADbeefz"), (std::vector<std::string>{"DEADbeef"}));
  EXPECT_EQ(pieces("a{,2}", "aaa"), (std::vector<std::string>{"aa", "a"}));
  EXPECT_EQ(pieces("\\v", "a\x0B\n"), (std::vector<std::string>{"\x0B"}));
  EXPECT_EQ(pieces("\\u00e9", "caf\xC3\xA9"), (std::vector<std::string>{"\xC3\xA9"}));
  EXPECT_EQ(pieces("(?m:a.b)", "a\nb"), (std::vector<std::string>{"a\nb"}));
  EXPECT_EQ(pieces("\\bab\\b", "ab xab ab"), (std::vector<std::string>{"ab", "ab"}));
  EXPECT_EQ(pieces("(?i:'s)", "'S '\u017F 's"), (std::vector<std::string>{"'S", "'\u017F", "'s"}));
}

TEST(RegexTranslation, RefusesWhatItCannotMirror) {
  for (const char* bad : {"[a-z&&[^aeiou]]", "[[:alpha:]]", "\\X", "(?~abc)", "(?x) a b",
                          "(?i:stra\xC3\x9F"
                          "e)",
                          "(?i)class", "(?i:\\x{DF})", "(?i)\\p{Lu}", "\\q", "[abc", "(?W)x"}) {
    auto re = Regex::from_onig(bad);
    EXPECT_FALSE(re.ok()) << bad;
    if (!re.ok()) {
      EXPECT_NE(re.status().message().find("at byte"), std::string::npos) << re.status().message();
    }
  }
  EXPECT_TRUE(Regex::from_onig("(?i:'s|'t|'re|'ve|'m|'ll|'d)").ok());
  EXPECT_TRUE(Regex::from_onig("(?i)\\p{L}+").ok());
}

TEST(RegexLiteral, MatchesVerbatim) {
  auto re = Regex::from_literal("a.b*(");
  ASSERT_TRUE(re.ok());
  std::vector<std::pair<size_t, size_t>> m;
  ASSERT_TRUE((*re)->find_all("xa.b*(a-b", m).ok());
  EXPECT_EQ(m, (std::vector<std::pair<size_t, size_t>>{{1, 6}}));
}

TEST(RegexIteration, LongInputsDoNotExhaustTheJitStack) {
  const std::string word(200000, 'a');
  auto re = Regex::from_onig("[\\p{Lu}]*[\\p{Ll}]+|\\s+(?!\\S)|\\s+");
  ASSERT_TRUE(re.ok());
  std::vector<std::pair<size_t, size_t>> m;
  ASSERT_TRUE((*re)->find_all(word + std::string(100000, ' ') + "b", m).ok());
  ASSERT_EQ(m.size(), 4u);
  EXPECT_EQ(m[0], (std::pair<size_t, size_t>{0, 200000}));
}

}  // namespace
}  // namespace m2::text::tok
