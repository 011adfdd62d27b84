// PCRE2 character-class bodies (the text between '[' and ']') that match
// exactly a set of code points of the reference's Unicode version.
//
// PCRE2 10.42 knows Unicode 14, HF's Oniguruma Unicode 16, so `\p{L}` alone
// misses ~9,000 letters. Listing every range instead is exact but makes the
// JIT several times slower. So a category is written as PCRE2's own property
// plus the ranges PCRE2 lacks ("\p{L}\x{1C89}-\x{1C8A}..."), the missing
// ranges being found once per process by running PCRE2 over the category's
// code points. Where PCRE2 matches more than the table (a character whose
// category changed, e.g. U+1171E Mn -> Mc in Unicode 16; listed by the
// table generator for the PCRE2 Unicode version it ran with), or PCRE2 has
// another Unicode version, or the set includes unassigned code points, the
// explicit ranges are used. Tests check every class code point by code point.
#pragma once

#include <string>

#include "text/tokenizer/unicode_sets.h"

namespace m2::text::tok {

// Body for the union of the categories in `mask`; cached, thread-safe.
const std::string& pcre2_category_body(CategoryMask mask);

// Body listing `set` range by range (surrogates left out).
std::string pcre2_ranges_body(const CodepointSet& set);

// "\x{HHHH}"
std::string pcre2_codepoint(char32_t c);

}  // namespace m2::text::tok
