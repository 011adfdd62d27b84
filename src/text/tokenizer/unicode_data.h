// Unicode tables of the tokenizer, read back from HF `tokenizers` itself by
// tools/gen_tokenizer_unicode_tables.py (the generated .cpp files). They are
// the reference's own Unicode versions: Oniguruma's general categories for
// regexes, Rust std / regex-crate sets for Digits, single_word, lstrip,
// Lowercase, and masks that make utf8proc normalize like HF's older crate.
#pragma once

#include <cstdint>
#include <span>

namespace m2::text::tok {

// Unicode general categories (the two-letter abbreviations of UAX #44).
// kCn is "unassigned"; kCs (surrogates) never occurs in valid UTF-8.
enum class GeneralCategory : uint8_t {
  kLu,
  kLl,
  kLt,
  kLm,
  kLo,
  kMn,
  kMc,
  kMe,
  kNd,
  kNl,
  kNo,
  kPc,
  kPd,
  kPs,
  kPe,
  kPi,
  kPf,
  kPo,
  kSm,
  kSc,
  kSk,
  kSo,
  kZs,
  kZl,
  kZp,
  kCc,
  kCf,
  kCo,
  kCn,
  kCs,
};
inline constexpr int kGeneralCategoryCount = 30;

// Inclusive range of code points.
struct CodepointRange {
  char32_t first;
  char32_t last;
};

// The category of [start, next run's start).
struct CategoryRun {
  char32_t start;
  GeneralCategory category;
};

struct CategoryRange {
  GeneralCategory category;
  CodepointRange range;
};

struct LowercasePair {
  char32_t from;
  char32_t to;
};

namespace unicode_data {

extern const std::span<const CategoryRun> kCategoryRuns;  // sorted, from 0
extern const char kOnigUnicodeVersion[];                  // e.g. "16.0.0"
// What PCRE2's \p{..} matches beyond the table, per category, for the PCRE2
// Unicode version the tables were generated with.
extern const char kPcre2UnicodeVersion[];
extern const std::span<const CategoryRange> kPcre2Removals;

extern const std::span<const CodepointRange> kRustNumericExtra;  // char::is_numeric minus N
extern const std::span<const CodepointRange> kOnigWord;          // Oniguruma \w
extern const std::span<const CodepointRange> kRegexWord;         // Rust regex crate \w
extern const std::span<const CodepointRange> kWhiteSpace;        // White_Space
extern const std::span<const LowercasePair> kLowercase;          // char::to_lowercase

// Masks over utf8proc for HF's (older) normalization data.
extern const std::span<const CodepointRange> kNoDecomposition;
extern const std::span<const CodepointRange> kZeroCombiningClass;
extern const std::span<const CodepointRange> kNoComposition;
extern const char kUtf8procUnicodeVersion[];

}  // namespace unicode_data
}  // namespace m2::text::tok
