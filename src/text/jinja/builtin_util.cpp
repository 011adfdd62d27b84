#include "text/jinja/builtin_util.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <limits>

#include "text/jinja/ops.h"
#include "text/jinja/unicode.h"

namespace m2::text::jinja {

Status bind_args(std::string_view function, const CallArgs& args, std::initializer_list<const char*> params,
                 Params* bound) {
  bound->fill(nullptr);
  if (params.size() > kMaxParams) return errorf("{}(): too many parameters for bind_args", function);
  if (args.positional.size() > params.size()) {
    return errorf("{}() takes at most {} argument(s) ({} given)", function, params.size(), args.positional.size());
  }
  for (size_t i = 0; i < args.positional.size(); ++i) (*bound)[i] = &args.positional[i];
  for (const auto& [name, value] : args.keywords) {
    // A copy of the binding's reference: clang 14 cannot capture a structured binding.
    const auto& key = name;
    auto it = std::find_if(params.begin(), params.end(), [&](const char* p) { return key == p; });
    if (it == params.end()) return errorf("{}() got an unexpected keyword argument '{}'", function, name);
    size_t i = size_t(it - params.begin());
    if ((*bound)[i]) return errorf("{}() got multiple values for argument '{}'", function, name);
    (*bound)[i] = &value;
  }
  return {};
}

Result<int64_t> int_arg(const Value* v, int64_t def, std::string_view what) {
  if (!v) return def;
  if (v->is_undefined()) return undefined_error(*v);
  if (!v->is_integral()) return errorf("{} must be an integer, not {}", what, py_type_name(*v));
  return v->as_int();
}

Result<std::string> string_arg(const Value* v, std::string_view what) {
  if (!v) return errorf("{} is required", what);
  if (v->is_undefined()) return undefined_error(*v);
  if (!v->is_string()) return errorf("{} must be a string, not {}", what, py_type_name(*v));
  return v->as_string();
}

std::vector<Value> attribute_path(const Value& attribute) {
  if (!attribute.is_string()) return {attribute};
  std::vector<Value> parts;
  const std::string& s = attribute.as_string();
  size_t start = 0;
  while (true) {
    size_t dot = s.find('.', start);
    std::string part = s.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    const bool digits =
        !part.empty() && std::all_of(part.begin(), part.end(), [](char c) { return c >= '0' && c <= '9'; });
    int64_t n = 0;
    if (digits && std::from_chars(part.data(), part.data() + part.size(), n).ec == std::errc()) {
      parts.push_back(Value::integer(n));
    } else {
      parts.push_back(Value::string(std::move(part)));
    }
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
  return parts;
}

Result<Value> follow_attribute_path(const std::vector<Value>& path, const Value& item, const Value* default_value) {
  Value v = item;
  for (const Value& part : path) {
    M2_ASSIGN_OR_RETURN(v, get_item(v, part));
    if (default_value && !default_value->is_none() && v.is_undefined()) v = *default_value;
  }
  return v;
}

Value ignore_case(const Value& v) { return v.is_string() ? Value::string(to_lower(v.as_string())) : v; }

namespace {

std::string_view strip_ascii_and_unicode_space(std::string_view s) { return py_strip(s, nullptr, true, true); }

// Removes '_' that sit between two digits (Python's numeric literal rule);
// returns nullopt when an underscore is misplaced.
std::optional<std::string> remove_digit_separators(std::string_view s, bool hex) {
  std::string out;
  auto is_d = [&](char c) { return hex ? std::isxdigit(static_cast<unsigned char>(c)) != 0 : (c >= '0' && c <= '9'); };
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '_') {
      if (i == 0 || i + 1 >= s.size() || !is_d(s[i - 1]) || !is_d(s[i + 1])) return std::nullopt;
      continue;
    }
    out.push_back(s[i]);
  }
  return out;
}

}  // namespace

std::optional<int64_t> parse_py_int(std::string_view text, int base) {
  std::string_view s = strip_ascii_and_unicode_space(text);
  bool negative = false;
  if (!s.empty() && (s[0] == '+' || s[0] == '-')) {
    negative = s[0] == '-';
    s.remove_prefix(1);
  }
  auto has_prefix = [&](char p) {
    return s.size() >= 2 && s[0] == '0' && std::tolower(static_cast<unsigned char>(s[1])) == p;
  };
  if (base == 0) {
    base = has_prefix('x') ? 16 : has_prefix('o') ? 8 : has_prefix('b') ? 2 : 10;
    if (base != 10) s.remove_prefix(2);
    // Python refuses "010" with base 0 (ambiguous octal); "000" is fine.
    else if (s.size() > 1 && s[0] == '0' && s.find_first_not_of("0_") != std::string_view::npos)
      return std::nullopt;
  } else if ((base == 16 && has_prefix('x')) || (base == 8 && has_prefix('o')) || (base == 2 && has_prefix('b'))) {
    s.remove_prefix(2);
    if (!s.empty() && s[0] == '_') s.remove_prefix(1);  // "0x_1f" is valid
  }
  if (base < 2 || base > 36 || s.empty()) return std::nullopt;
  auto digits = remove_digit_separators(s, base > 10);
  if (!digits || digits->empty()) return std::nullopt;
  uint64_t value = 0;
  for (char c : *digits) {
    int d = std::isdigit(static_cast<unsigned char>(c))   ? c - '0'
            : std::isalpha(static_cast<unsigned char>(c)) ? std::tolower(static_cast<unsigned char>(c)) - 'a' + 10
                                                          : 99;
    if (d >= base) return std::nullopt;
    if (value > (uint64_t(std::numeric_limits<int64_t>::max()) - uint64_t(d)) / uint64_t(base)) return std::nullopt;
    value = value * uint64_t(base) + uint64_t(d);
  }
  return negative ? -int64_t(value) : int64_t(value);
}

std::optional<double> parse_py_float(std::string_view text) {
  std::string_view s = strip_ascii_and_unicode_space(text);
  std::string lower;
  for (char c : s) lower.push_back(char(std::tolower(static_cast<unsigned char>(c))));
  std::string_view body = lower;
  bool negative = false;
  if (!body.empty() && (body[0] == '+' || body[0] == '-')) {
    negative = body[0] == '-';
    body.remove_prefix(1);
  }
  if (body == "inf" || body == "infinity") return negative ? -INFINITY : INFINITY;
  if (body == "nan") return NAN;
  if (body.empty() || !(std::isdigit(static_cast<unsigned char>(body[0])) || body[0] == '.')) return std::nullopt;
  auto digits = remove_digit_separators(body, false);
  if (!digits) return std::nullopt;
  double v = 0;
  auto res = std::from_chars(digits->data(), digits->data() + digits->size(), v);
  if (res.ec == std::errc::result_out_of_range) {
    // Python returns inf on overflow and 0.0 on underflow.
    bool big = digits->find('e') == std::string::npos || (*digits)[digits->find('e') + 1] != '-';
    v = big ? INFINITY : 0.0;
  } else if (res.ec != std::errc() || res.ptr != digits->data() + digits->size()) {
    return std::nullopt;
  }
  return negative ? -v : v;
}

}  // namespace m2::text::jinja
