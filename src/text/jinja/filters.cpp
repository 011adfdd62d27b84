// Jinja's built-in filters on single values (jinja2/filters.py), with
// transformers' `tojson`; filters over sequences are in filters_seq.cpp.
#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstring>
#include <utility>

#include "text/jinja/builtin_util.h"
#include "text/jinja/builtins.h"
#include "text/jinja/ops.h"
#include "text/jinja/py_format.h"
#include "text/jinja/unicode.h"

namespace m2::text::jinja {
namespace {

bool flag(const Value* v, bool def) { return v ? v->truthy() : def; }

// Widths beyond this are refused rather than allocated (Python would raise
// MemoryError somewhere past it anyway).
constexpr int64_t kMaxPadding = int64_t(1) << 24;

Result<Value> f_abs(const Value& v, const CallArgs& a) {
  Params p;
  M2_RETURN_IF_ERROR(bind_args("abs", a, {}, &p));
  if (v.is_undefined()) return undefined_error(v);
  if (v.is_float()) return Value::real(std::fabs(v.as_double()));
  if (v.is_integral()) {
    if (v.as_int() == INT64_MIN) return errorf("integer overflow");
    return Value::integer(v.as_int() < 0 ? -v.as_int() : v.as_int());
  }
  return errorf("bad operand type for abs(): '{}'", py_type_name(v));
}

Result<Value> f_attr(const Value& v, const CallArgs& a) {
  Params p;
  M2_RETURN_IF_ERROR(bind_args("attr", a, {"name"}, &p));
  M2_ASSIGN_OR_RETURN(std::string name, string_arg(p[0], "attr name"));
  if (v.is_undefined()) return undefined_error(v);
  // `attr` never falls back to items: a dict key is not an attribute.
  if (v.is_dict() && method_kind(v, name) == MethodKind::kNone) {
    return Value::undefined(fmt::format("'{}' has no attribute '{}'", object_type_repr(v), name));
  }
  return get_attr(v, name);
}

std::string capitalize(std::string_view s) {
  std::string out;
  size_t pos = 0;
  bool first = true;
  while (pos < s.size()) {
    char32_t cp = next_code_point(s, &pos);
    append_utf8(&out, first ? title_cp(cp) : lower_cp(cp));
    first = false;
  }
  return out;
}

Result<Value> f_capitalize(const Value& v, const CallArgs& a) {
  Params p;
  M2_RETURN_IF_ERROR(bind_args("capitalize", a, {}, &p));
  return Value::string(capitalize(py_str(v)));
}

Result<Value> f_center(const Value& v, const CallArgs& a) {
  Params p;
  M2_RETURN_IF_ERROR(bind_args("center", a, {"width"}, &p));
  M2_ASSIGN_OR_RETURN(int64_t width, int_arg(p[0], 80, "center width"));
  if (width > kMaxPadding) return errorf("center width {} is too large", width);
  std::string s = py_str(v);
  const int64_t len = int64_t(code_point_count(s));
  if (width <= len) return Value::string(std::move(s));
  // CPython's str.center: the odd space goes left when width is odd.
  const int64_t marg = width - len;
  const int64_t left = marg / 2 + (marg & width & 1);
  return Value::string(std::string(size_t(left), ' ') + s + std::string(size_t(marg - left), ' '));
}

Result<Value> f_length(const Value& v, const CallArgs& a) {
  Params p;
  M2_RETURN_IF_ERROR(bind_args("length", a, {}, &p));
  M2_ASSIGN_OR_RETURN(int64_t n, py_len(v));
  return Value::integer(n);
}

Result<Value> f_default(const Value& v, const CallArgs& a) {
  Params p;
  M2_RETURN_IF_ERROR(bind_args("default", a, {"default_value", "boolean"}, &p));
  if (v.is_undefined() || (flag(p[1], false) && !v.truthy())) return p[0] ? *p[0] : Value::string("");
  return v;
}

Result<Value> f_escape(const Value& v, const CallArgs& a) {
  Params p;
  M2_RETURN_IF_ERROR(bind_args("escape", a, {}, &p));
  std::string out;
  for (char c : py_str(v)) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&#34;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out.push_back(c);
    }
  }
  return Value::string(std::move(out));
}

Result<Value> f_float(const Value& v, const CallArgs& a) {
  Params p;
  M2_RETURN_IF_ERROR(bind_args("float", a, {"default"}, &p));
  if (v.is_undefined()) return undefined_error(v);
  if (v.is_number()) return Value::real(v.as_double());
  if (v.is_string()) {
    if (auto f = parse_py_float(v.as_string())) return Value::real(*f);
  }
  return p[0] ? *p[0] : Value::real(0.0);
}

Result<Value> f_indent(const Value& v, const CallArgs& a) {
  Params p;
  M2_RETURN_IF_ERROR(bind_args("indent", a, {"width", "first", "blank"}, &p));
  std::string indention;
  if (p[0] && p[0]->is_string()) {
    indention = p[0]->as_string();
  } else {
    M2_ASSIGN_OR_RETURN(int64_t width, int_arg(p[0], 4, "indent width"));
    if (width > kMaxPadding) return errorf("indent width {} is too large", width);
    indention.assign(size_t(std::max<int64_t>(width, 0)), ' ');
  }
  std::vector<std::string> lines = py_splitlines(py_str(v) + "\n");
  std::string rv;
  if (flag(p[2], false)) {
    for (size_t i = 0; i < lines.size(); ++i) {
      if (i) {
        rv.push_back('\n');
        rv += indention;
      }
      rv += lines[i];
    }
  } else {
    rv = lines.empty() ? "" : lines[0];
    for (size_t i = 1; i < lines.size(); ++i) {
      rv.push_back('\n');
      if (!lines[i].empty()) rv += indention;
      rv += lines[i];
    }
  }
  if (flag(p[1], false)) rv = indention + rv;
  return Value::string(std::move(rv));
}

Result<Value> f_int(const Value& v, const CallArgs& a) {
  Params p;
  M2_RETURN_IF_ERROR(bind_args("int", a, {"default", "base"}, &p));
  M2_ASSIGN_OR_RETURN(int64_t base, int_arg(p[1], 10, "int base"));
  const Value fallback = p[0] ? *p[0] : Value::integer(0);
  if (v.is_undefined()) return undefined_error(v);
  if (v.is_integral()) return Value::integer(v.as_int());
  if (v.is_float()) {
    double f = v.as_double();
    if (std::isnan(f) || std::isinf(f) || std::fabs(f) >= 9.2e18) return fallback;
    return Value::integer(int64_t(f));
  }
  if (v.is_string()) {
    if (auto i = parse_py_int(v.as_string(), int(base))) return Value::integer(*i);
    if (auto f = parse_py_float(v.as_string())) {  // Jinja's "42.23"|int quirk
      if (!std::isnan(*f) && !std::isinf(*f) && std::fabs(*f) < 9.2e18) return Value::integer(int64_t(*f));
    }
  }
  return fallback;
}

Result<Value> f_lower(const Value& v, const CallArgs& a) {
  Params p;
  M2_RETURN_IF_ERROR(bind_args("lower", a, {}, &p));
  return Value::string(to_lower(py_str(v)));
}

Result<Value> f_upper(const Value& v, const CallArgs& a) {
  Params p;
  M2_RETURN_IF_ERROR(bind_args("upper", a, {}, &p));
  return Value::string(to_upper(py_str(v)));
}

// Python str.replace(old, new, count): an empty `old` inserts `new` around
// every character.
std::string py_replace(const std::string& s, const std::string& old, const std::string& repl, int64_t count) {
  std::string out;
  if (old.empty()) {
    size_t pos = 0;
    int64_t n = 0;
    while (count < 0 || n < count) {
      out += repl;
      ++n;
      if (pos >= s.size()) return out;
      size_t start = pos;
      next_code_point(s, &pos);
      out.append(s, start, pos - start);
    }
    out.append(s, pos, std::string::npos);
    return out;
  }
  size_t pos = 0;
  int64_t n = 0;
  while (count < 0 || n < count) {
    size_t hit = s.find(old, pos);
    if (hit == std::string::npos) break;
    out.append(s, pos, hit - pos);
    out += repl;
    pos = hit + old.size();
    ++n;
  }
  out.append(s, pos, std::string::npos);
  return out;
}

Result<Value> f_replace(const Value& v, const CallArgs& a) {
  Params p;
  M2_RETURN_IF_ERROR(bind_args("replace", a, {"old", "new", "count"}, &p));
  if (!p[0] || !p[1]) return errorf("replace() requires the 'old' and 'new' arguments");
  int64_t count = -1;
  if (p[2] && !p[2]->is_none()) {
    M2_ASSIGN_OR_RETURN(count, int_arg(p[2], -1, "replace count"));
  }
  return Value::string(py_replace(py_str(v), py_str(*p[0]), py_str(*p[1]), count));
}

Result<Value> f_round(const Value& v, const CallArgs& a) {
  Params p;
  M2_RETURN_IF_ERROR(bind_args("round", a, {"precision", "method"}, &p));
  M2_ASSIGN_OR_RETURN(int64_t precision, int_arg(p[0], 0, "round precision"));
  std::string method = "common";
  if (p[1]) {
    M2_ASSIGN_OR_RETURN(method, string_arg(p[1], "round method"));
  }
  if (method != "common" && method != "ceil" && method != "floor")
    return errorf("method must be common, ceil or floor");
  if (v.is_undefined()) return undefined_error(v);
  if (!v.is_number()) return errorf("type {} doesn't define __round__ method", py_type_name(v));
  const double x = v.as_double();
  if (method != "common") {
    const double scale = std::pow(10.0, double(precision));
    return Value::real((method == "ceil" ? std::ceil(x * scale) : std::floor(x * scale)) / scale);
  }
  if (v.is_integral() && precision >= 0) return Value::integer(v.as_int());
  if (std::isnan(x) || std::isinf(x)) return Value::real(x);
  if (precision >= 0 && precision <= 300) {
    // Correctly rounded decimal, ties to even, as CPython's round() does.
    char buf[400];
    auto res = std::to_chars(buf, buf + sizeof(buf), x, std::chars_format::fixed, int(precision));
    double r = 0;
    std::from_chars(buf, res.ptr, r);
    return Value::real(r);
  }
  const double scale = std::pow(10.0, double(-precision));
  double r = std::nearbyint(x / scale) * scale;
  return v.is_integral() ? Value::integer(int64_t(r)) : Value::real(r);
}

Result<Value> f_safe(const Value& v, const CallArgs& a) {
  Params p;
  M2_RETURN_IF_ERROR(bind_args("safe", a, {}, &p));
  return Value::string(py_str(v));
}

Result<Value> f_string(const Value& v, const CallArgs& a) {
  Params p;
  M2_RETURN_IF_ERROR(bind_args("string", a, {}, &p));
  return v.is_string() ? v : Value::string(py_str(v));
}

bool is_title_separator(char32_t cp) {
  return cp == '-' || cp == '(' || cp == '{' || cp == '[' || cp == '<' || is_py_space(cp);
}

Result<Value> f_title(const Value& v, const CallArgs& a) {
  Params p;
  M2_RETURN_IF_ERROR(bind_args("title", a, {}, &p));
  // Jinja splits on runs of [-\s({\[<] and upper-cases the first character
  // of every piece, lower-casing the rest.
  const std::string s = py_str(v);
  std::string out;
  size_t pos = 0;
  bool piece_start = true;
  bool in_separator = false;
  while (pos < s.size()) {
    char32_t cp = next_code_point(s, &pos);
    const bool sep = is_title_separator(cp);
    if (sep != in_separator) piece_start = true;
    in_separator = sep;
    append_utf8(&out, piece_start ? upper_cp(cp) : lower_cp(cp));
    piece_start = false;
  }
  return Value::string(std::move(out));
}

Result<Value> f_tojson(const Value& v, const CallArgs& a) {
  Params p;
  M2_RETURN_IF_ERROR(bind_args("tojson", a, {"ensure_ascii", "indent", "separators", "sort_keys"}, &p));
  JsonDumpOptions opt;
  opt.ensure_ascii = flag(p[0], false);
  opt.sort_keys = flag(p[3], false);
  if (p[1] && !p[1]->is_none()) {
    if (p[1]->is_string()) {
      opt.indent = p[1]->as_string();
    } else if (p[1]->is_integral()) {
      opt.indent = std::string(size_t(std::max<int64_t>(p[1]->as_int(), 0)), ' ');
    } else {
      return errorf("tojson indent must be an integer or a string, not {}", py_type_name(*p[1]));
    }
  }
  if (p[2] && !p[2]->is_none()) {
    const Value& s = *p[2];
    if (!s.is_list() || s.as_list().items.size() != 2 || !s.as_list().items[0].is_string() ||
        !s.as_list().items[1].is_string()) {
      return errorf("tojson separators must be a pair of strings");
    }
    opt.item_separator = s.as_list().items[0].as_string();
    opt.key_separator = s.as_list().items[1].as_string();
  }
  M2_ASSIGN_OR_RETURN(std::string json, py_json_dumps(v, opt));
  return Value::string(std::move(json));
}

Result<Value> f_trim(const Value& v, const CallArgs& a) {
  Params p;
  M2_RETURN_IF_ERROR(bind_args("trim", a, {"chars"}, &p));
  std::string chars;
  const bool has_chars = p[0] && !p[0]->is_none();
  if (has_chars) {
    M2_ASSIGN_OR_RETURN(chars, string_arg(p[0], "trim chars"));
  }
  const std::string s = py_str(v);
  return Value::string(std::string(py_strip(s, has_chars ? &chars : nullptr, true, true)));
}

Result<Value> f_wordcount(const Value& v, const CallArgs& a) {
  Params p;
  M2_RETURN_IF_ERROR(bind_args("wordcount", a, {}, &p));
  const std::string s = py_str(v);
  int64_t words = 0;
  bool in_word = false;
  size_t pos = 0;
  while (pos < s.size()) {
    char32_t cp = next_code_point(s, &pos);
    const bool w = cp == '_' || is_py_alnum(cp);  // Python's \w
    if (w && !in_word) ++words;
    in_word = w;
  }
  return Value::integer(words);
}

struct FilterEntry {
  const char* name;
  ast::FilterFn fn;
};

constexpr FilterEntry kFilters[] = {
    {"abs", f_abs},       {"attr", f_attr},     {"capitalize", f_capitalize}, {"center", f_center},
    {"count", f_length},  {"d", f_default},     {"default", f_default},       {"e", f_escape},
    {"escape", f_escape}, {"float", f_float},   {"indent", f_indent},         {"int", f_int},
    {"length", f_length}, {"lower", f_lower},   {"replace", f_replace},       {"round", f_round},
    {"safe", f_safe},     {"string", f_string}, {"title", f_title},           {"tojson", f_tojson},
    {"trim", f_trim},     {"upper", f_upper},   {"wordcount", f_wordcount},
};

}  // namespace

ast::FilterFn find_filter(std::string_view name) {
  for (const auto& f : kFilters) {
    if (name == f.name) return f.fn;
  }
  return find_sequence_filter(name);
}

}  // namespace m2::text::jinja
