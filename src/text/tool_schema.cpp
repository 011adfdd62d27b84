#include "text/tool_schema.h"

#include <algorithm>
#include <cerrno>
#include <clocale>
#include <cmath>
#include <cstdlib>
#include <locale.h>

namespace m2::text {
namespace {

uint8_t type_bit(std::string_view name) {
  std::string lower(name);
  for (char& c : lower) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  if (lower == "integer" || lower == "int") return ParamTypes::kInteger;
  if (lower == "number" || lower == "float") return ParamTypes::kNumber;
  if (lower == "boolean" || lower == "bool") return ParamTypes::kBoolean;
  if (lower == "object") return ParamTypes::kObject;
  if (lower == "array") return ParamTypes::kArray;
  if (lower == "string" || lower == "str" || lower == "text") return ParamTypes::kString;
  return ParamTypes::kOther;
}

// The type vLLM infers from one enum value (Python's isinstance order).
uint8_t enum_value_bit(const Json& v) {
  if (v.is_null()) return ParamTypes::kOther;  // "null"
  if (v.is_boolean()) return ParamTypes::kBoolean;
  if (v.is_number_integer()) return ParamTypes::kInteger;
  if (v.is_number_float()) return ParamTypes::kNumber;
  if (v.is_string()) return ParamTypes::kString;
  if (v.is_array()) return ParamTypes::kArray;
  return ParamTypes::kObject;
}

uint8_t extract_types(const Json& schema, int depth) {
  if (!schema.is_object() || depth > kMaxSchemaDepth) return ParamTypes::kString;
  uint8_t bits = 0;
  if (auto it = schema.find("type"); it != schema.end()) {
    if (it->is_string()) {
      bits |= type_bit(it->get_ref<const std::string&>());
    } else if (it->is_array()) {
      for (const auto& t : *it) {
        if (t.is_string()) bits |= type_bit(t.get_ref<const std::string&>());
      }
    }
  }
  if (auto it = schema.find("enum"); it != schema.end() && it->is_array()) {
    for (const auto& v : *it) bits |= enum_value_bit(v);
  }
  for (const char* key : {"anyOf", "oneOf", "allOf"}) {
    auto it = schema.find(key);
    if (it == schema.end() || !it->is_array()) continue;
    // As in vLLM, a choice without type information counts as a string.
    for (const auto& choice : *it) bits |= extract_types(choice, depth + 1);
  }
  return bits ? bits : static_cast<uint8_t>(ParamTypes::kString);
}

// Decodes the code point starting at s[i] (valid UTF-8), setting *len.
char32_t decode_at(std::string_view s, size_t i, size_t* len) {
  const auto b = static_cast<unsigned char>(s[i]);
  size_t n = b < 0x80 ? 1 : b < 0xE0 ? 2 : b < 0xF0 ? 3 : 4;
  if (i + n > s.size()) n = 1;
  char32_t cp = n == 1 ? b : n == 2 ? (b & 0x1F) : n == 3 ? (b & 0x0F) : (b & 0x07);
  for (size_t k = 1; k < n; ++k) cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3F);
  *len = n;
  return cp;
}

bool is_python_space(char32_t c) {
  return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 ||
         c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 ||
         c == 0x202F || c == 0x205F || c == 0x3000;
}

std::string ascii_lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return out;
}

bool is_digit(char c) { return c >= '0' && c <= '9'; }

// Python's "digitpart": digit (["_"] digit)*, starting at s[*i]; appends the
// digits to *out and advances *i. False if there is no digit at *i.
bool take_digits(std::string_view s, size_t* i, std::string* out) {
  if (*i >= s.size() || !is_digit(s[*i])) return false;
  while (*i < s.size()) {
    if (is_digit(s[*i])) {
      out->push_back(s[(*i)++]);
    } else if (s[*i] == '_' && *i + 1 < s.size() && is_digit(s[*i + 1])) {
      ++*i;
    } else {
      break;
    }
  }
  return true;
}

// Python's int(t) for base 10, limited to int64/uint64.
bool parse_python_int(std::string_view t, OrderedJson* out) {
  size_t i = 0;
  std::string text;
  if (i < t.size() && (t[i] == '+' || t[i] == '-')) text.push_back(t[i++]);
  if (!take_digits(t, &i, &text) || i != t.size()) return false;
  if (text[0] == '+') text.erase(0, 1);
  errno = 0;
  char* end = nullptr;
  if (text[0] == '-') {
    const long long v = std::strtoll(text.c_str(), &end, 10);
    if (errno == ERANGE) return false;
    *out = static_cast<int64_t>(v);
  } else {
    const unsigned long long v = std::strtoull(text.c_str(), &end, 10);
    if (errno == ERANGE) return false;
    if (v <= static_cast<unsigned long long>(INT64_MAX)) {
      *out = static_cast<int64_t>(v);
    } else {
      *out = static_cast<uint64_t>(v);
    }
  }
  return true;
}

// strtod in the "C" locale, whatever the process locale is.
double strtod_c(const std::string& text) {
  static const locale_t c_locale = newlocale(LC_ALL_MASK, "C", static_cast<locale_t>(0));
  return strtod_l(text.c_str(), nullptr, c_locale);
}

// Python's float(t) for decimal text (no inf/nan), then vLLM's "an integral
// float becomes an int".
bool parse_python_number(std::string_view t, OrderedJson* out) {
  size_t i = 0;
  std::string text;
  if (i < t.size() && (t[i] == '+' || t[i] == '-')) text.push_back(t[i++]);
  const bool int_part = take_digits(t, &i, &text);
  bool frac_part = false;
  if (i < t.size() && t[i] == '.') {
    text.push_back(t[i++]);
    frac_part = take_digits(t, &i, &text);
  }
  if (!int_part && !frac_part) return false;
  if (i < t.size() && (t[i] == 'e' || t[i] == 'E')) {
    text.push_back(t[i++]);
    if (i < t.size() && (t[i] == '+' || t[i] == '-')) text.push_back(t[i++]);
    if (!take_digits(t, &i, &text)) return false;
  }
  if (i != t.size()) return false;
  const double v = strtod_c(text);
  if (!std::isfinite(v)) return false;  // overflow: Python gives inf, and vLLM's int(inf) raises
  if (v == std::trunc(v) && std::fabs(v) < 9223372036854775808.0) {
    *out = static_cast<int64_t>(v);
  } else {
    *out = v;
  }
  return true;
}

// Nesting depth of JSON text, counting brackets outside strings.
int json_nesting_depth(std::string_view t) {
  int depth = 0, max_depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < t.size(); ++i) {
    const char c = t[i];
    if (in_string) {
      if (c == '\\') {
        ++i;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      max_depth = std::max(max_depth, ++depth);
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return max_depth;
}

// Python's json.loads(t), within the limits listed in the header.
bool parse_python_json(std::string_view t, OrderedJson* out) {
  if (t.substr(0, 3) == "\xEF\xBB\xBF") return false;  // Python refuses a BOM; nlohmann skips it
  if (json_nesting_depth(t) > kMaxJsonDepth) return false;
  OrderedJson v = OrderedJson::parse(t.begin(), t.end(), nullptr, /*allow_exceptions=*/false);
  if (v.is_discarded()) return false;
  *out = std::move(v);
  return true;
}

}  // namespace

ParamTypes param_types_from_schema(const Json& schema) {
  ParamTypes types;
  types.bits = extract_types(schema, 0);
  return types;
}

ToolSchemas ToolSchemas::from_request_tools(const Json& tools) {
  ToolSchemas schemas;
  if (!tools.is_array()) return schemas;
  for (const auto& tool : tools) {
    if (!tool.is_object()) continue;
    auto fn = tool.find("function");
    if (fn == tool.end() || !fn->is_object()) continue;
    auto name = fn->find("name");
    if (name == fn->end() || !name->is_string()) continue;
    auto [entry, inserted] = schemas.tools_.try_emplace(name->get<std::string>());
    if (!inserted) continue;  // the first tool of a name wins
    auto params = fn->find("parameters");
    if (params == fn->end() || !params->is_object()) continue;
    auto props = params->find("properties");
    if (props == params->end() || !props->is_object()) continue;
    for (const auto& [param, schema] : props->items()) {
      entry->second[param] = param_types_from_schema(schema);
    }
  }
  return schemas;
}

ParamTypes ToolSchemas::param_types(std::string_view tool, std::string_view param) const {
  auto t = tools_.find(std::string(tool));
  if (t == tools_.end()) return ParamTypes{};
  auto p = t->second.find(std::string(param));
  return p == t->second.end() ? ParamTypes{} : p->second;
}

size_t python_space_prefix(std::string_view s) {
  size_t begin = 0;
  while (begin < s.size()) {
    size_t len;
    if (!is_python_space(decode_at(s, begin, &len))) break;
    begin += len;
  }
  return begin;
}

std::string_view trim_python_space(std::string_view s) {
  const size_t begin = python_space_prefix(s);
  size_t end = s.size();
  while (end > begin) {
    size_t start = end - 1;  // back up to the lead byte of the last character
    while (start > begin && (static_cast<unsigned char>(s[start]) & 0xC0) == 0x80) --start;
    size_t len;
    if (!is_python_space(decode_at(s, start, &len))) break;
    end = start;
  }
  return s.substr(begin, end - begin);
}

bool is_null_word(std::string_view trimmed) {
  if (trimmed.size() < 3 || trimmed.size() > 4) return false;
  const std::string lower = ascii_lower(trimmed);
  return lower == "null" || lower == "none" || lower == "nil";
}

OrderedJson convert_param_value(std::string_view value, ParamTypes types) {
  const std::string_view t = trim_python_space(value);
  if (is_null_word(t)) return nullptr;
  OrderedJson out;
  if ((types.bits & ParamTypes::kInteger) && parse_python_int(t, &out)) return out;
  if ((types.bits & ParamTypes::kNumber) && parse_python_number(t, &out)) return out;
  if (types.bits & ParamTypes::kBoolean) {
    const std::string lower = ascii_lower(t);
    if (lower == "true" || lower == "1" || lower == "yes" || lower == "on") return true;
    if (lower == "false" || lower == "0" || lower == "no" || lower == "off") return false;
  }
  if ((types.bits & (ParamTypes::kObject | ParamTypes::kArray)) && parse_python_json(t, &out)) return out;
  if (types.bits & ParamTypes::kString) return std::string(value);
  if (parse_python_json(t, &out)) return out;
  return std::string(value);
}

}  // namespace m2::text
