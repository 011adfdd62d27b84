// UTF-8 and Unicode helpers with Python `str` semantics, for the Jinja
// interpreter: Python indexes, slices and measures strings in code points and
// classifies whitespace with str.isspace(), so these functions do the same on
// UTF-8 bytes. Strings handled here are valid UTF-8 (checked at the borders:
// template source and JSON input); an invalid byte is read as one code point
// U+FFFD so that nothing loops or reads out of bounds.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace m2::text::jinja {

// Decodes the code point at s[*pos] and advances *pos past it.
char32_t next_code_point(std::string_view s, size_t* pos);
void append_utf8(std::string* out, char32_t cp);

// Byte offset of the first invalid UTF-8 sequence, or npos when valid.
size_t find_invalid_utf8(std::string_view s);

bool is_ascii(std::string_view s);
// Number of code points (Python len()).
size_t code_point_count(std::string_view s);
// The string as code points (used where Python indexes by code point).
std::u32string to_code_points(std::string_view s);
std::string from_code_points(const char32_t* begin, const char32_t* end);

// Python str.isspace() for one code point (Unicode White_Space plus the ASCII
// separators \x1c-\x1f that Python also counts).
bool is_py_space(char32_t cp);
// Python str.isprintable() for one code point (used by repr()).
bool is_py_printable(char32_t cp);
bool is_identifier_start(char32_t cp);
// Letters (L*) and numbers (N*): Python's str.isalnum() / regex \w.
bool is_py_alnum(char32_t cp);
bool is_py_alpha(char32_t cp);
// Decimal digits (Nd): str.isdigit() for the characters templates meet.
bool is_py_digit(char32_t cp);
// Case of a letter: 'l' (Ll), 'u' (Lu), 't' (Lt), or 0 when uncased.
char case_class(char32_t cp);
bool is_identifier_continue(char32_t cp);

// Simple (one-to-one) Unicode case mappings, as utf8proc provides them.
// Python's str.upper() additionally applies SpecialCasing (e.g. "ß" -> "SS");
// that difference is documented in the chat-template notes.
std::string to_upper(std::string_view s);
std::string to_lower(std::string_view s);
char32_t upper_cp(char32_t cp);
char32_t lower_cp(char32_t cp);
char32_t title_cp(char32_t cp);

// Python str.strip()/lstrip()/rstrip(): with chars == nullptr strips
// whitespace, otherwise the code points contained in *chars.
std::string_view py_strip(std::string_view s, const std::string* chars, bool left, bool right);

// Python str.splitlines() without the line ends (boundaries: \n \r \r\n
// \v \f \x1c-\x1e \x85 \u2028 \u2029).
std::vector<std::string> py_splitlines(std::string_view s);

}  // namespace m2::text::jinja
