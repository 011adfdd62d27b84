// JSON text exactly as Python's json.dumps(value, ensure_ascii=False) writes
// it, with the default separators ", " and ": " and key order kept.
//
// vLLM and SGLang build a tool call's `arguments` string with that call, and
// clients compare and cache on it, so the tool-call parsers produce the
// same bytes. Floats print as Python's repr (shortest round-trip digits;
// exponent form below 1e-4 and from 1e16, as in 1e-05 and 1e+16).
#pragma once

#include <string>
#include <string_view>

#include "util/json.h"

namespace m2::text {

// Appends `utf8` (valid UTF-8) as a quoted JSON string: `"` `\` and control
// characters escaped as Python does (\n \r \t \b \f, else \u00xx), every
// other character written as is.
void append_python_json_string(std::string_view utf8, std::string* out);

// Python's repr() of a finite double ("3.0", "0.1", "1e-05", "1.5e+16").
std::string python_float_repr(double value);

// json.dumps(value, ensure_ascii=False). Non-finite floats cannot occur in
// values parsed from JSON text and are written as null.
std::string python_json_dumps(const OrderedJson& value);

}  // namespace m2::text
