// Helpers shared by the built-in filters, tests, methods and globals:
// argument checks, Jinja's attribute-path getter, and Python's int()/float()
// string parsing.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "text/jinja/builtins.h"
#include "text/jinja/value.h"
#include "util/status.h"

namespace m2::text::jinja {

// An integer argument (bool counts, as in Python); `def` when absent.
Result<int64_t> int_arg(const Value* v, int64_t def, std::string_view what);
// A string argument; error naming `what` when it is something else.
Result<std::string> string_arg(const Value* v, std::string_view what);

// Jinja's make_attrgetter: "a.b.0" looks up item "a", then "b", then 0
// (digit-only parts become integers); a non-string attribute is one key.
std::vector<Value> attribute_path(const Value& attribute);
// Follows the path with getitem semantics; when `default_value` is given,
// an undefined step is replaced by it (map(attribute=..., default=...)).
Result<Value> follow_attribute_path(const std::vector<Value>& path, const Value& item, const Value* default_value);

// Jinja's ignore_case post-processor: lowercases strings, keeps the rest.
Value ignore_case(const Value& v);

// Python int(s, base) on a string (whitespace, sign, '_' separators, base 0
// prefixes); nullopt where Python raises ValueError.
std::optional<int64_t> parse_py_int(std::string_view s, int base);
// Python float(s) on a string ("1e3", " 2.5 ", "inf", "nan", "1_0.5").
std::optional<double> parse_py_float(std::string_view s);

// The filters of filters_seq.cpp (find_filter consults them too).
ast::FilterFn find_sequence_filter(std::string_view name);

}  // namespace m2::text::jinja
