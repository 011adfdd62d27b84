// Translation of HF tokenizers' regex dialect (Oniguruma, Ruby syntax) into
// a PCRE2 pattern with the same matches.
//
// What differs and is rewritten: Unicode classes (\p{..}, \s, \d, \w, \h,
// \b) follow the reference's Unicode tables (pcre2_classes.h), `\h` is a hex
// digit, `\v` is U+000B, `\uHHHH` is a code point, `(?m)` is dot-all, `{,n}`
// is `{0,n}`. What cannot be mirrored exactly (nested classes and `&&`,
// POSIX brackets, grapheme escapes \X \y \Y, the absent operator, Oniguruma-
// only options, extended mode) is refused with the offset of the construct,
// never guessed. Case-insensitive regions are mirrored only where the two
// engines fold alike (ASCII, no multi-character folds such as ß = ss).
// Script properties (\p{Han}) pass to PCRE2 as `\p{sc:Han}`: exact for
// characters PCRE2's Unicode version knows.
#pragma once

#include <string>
#include <string_view>

#include "util/status.h"

namespace m2::text::tok {

Result<std::string> translate_onig_pattern(std::string_view pattern);

// A PCRE2 pattern matching `literal` as is (what a {"String": ...} pattern means).
std::string pcre2_escape_literal(std::string_view literal);

}  // namespace m2::text::tok
