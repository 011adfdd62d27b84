// Python's text forms of values: str() (what `{{ x }}` prints), repr() (how
// values print inside lists and dicts), float repr, and json.dumps as
// transformers' `tojson` filter calls it. Chat templates print these forms
// into prompts, so they must match CPython byte for byte.
#pragma once

#include <optional>
#include <string>

#include "text/jinja/value.h"
#include "util/status.h"

namespace m2::text::jinja {

// float.__repr__: shortest round-trip digits, fixed notation for
// 1e-4 <= |x| < 1e16 with at least one fractional digit ("1.0"), otherwise
// scientific with a two-digit exponent ("1e+16", "1.5e-07"); "inf", "nan".
std::string py_float_repr(double f);

// repr(x) appended to *out (strings quoted and escaped as CPython does).
void append_py_repr(const Value& v, std::string* out);
// str(x) appended to *out: strings verbatim, Undefined empty, others repr().
void append_py_str(const Value& v, std::string* out);
std::string py_str(const Value& v);
std::string py_repr(const Value& v);

struct JsonDumpOptions {
  bool ensure_ascii = false;
  // Python's indent: none, a number of spaces, or a literal string.
  std::optional<std::string> indent;
  // Python's defaults: (", ", ": ") without indent, (",", ": ") with indent.
  std::optional<std::string> item_separator;
  std::optional<std::string> key_separator;
  bool sort_keys = false;
};

// json.dumps(x, ...) as CPython writes it. Fails like Python on values JSON
// cannot hold ("Object of type Undefined is not JSON serializable").
Result<std::string> py_json_dumps(const Value& v, const JsonDumpOptions& options);

}  // namespace m2::text::jinja
