#include "text/jinja/py_format.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>

#include "text/jinja/callable.h"
#include "text/jinja/unicode.h"

namespace m2::text::jinja {

std::string py_float_repr(double f) {
  if (std::isnan(f)) return "nan";
  if (std::isinf(f)) return f < 0 ? "-inf" : "inf";
  // Shortest round-trip digits in scientific form: "-d.ddde+XX".
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof(buf), f, std::chars_format::scientific);
  std::string_view sci(buf, size_t(res.ptr - buf));
  const bool negative = sci.front() == '-';
  if (negative) sci.remove_prefix(1);
  const size_t e_pos = sci.find('e');
  std::string digits;
  for (char c : sci.substr(0, e_pos)) {
    if (c != '.') digits.push_back(c);
  }
  int exponent = 0;
  std::from_chars(sci.data() + e_pos + 1 + (sci[e_pos + 1] == '+'), sci.data() + sci.size(), exponent);
  while (digits.size() > 1 && digits.back() == '0') digits.pop_back();
  // decpt: position of the decimal point relative to the digit string, as in
  // CPython's float_repr_style 'r' (fixed when -4 < decpt <= 16).
  const int decpt = exponent + 1;
  std::string out = negative ? "-" : "";
  if (decpt > -4 && decpt <= 16) {
    if (decpt <= 0) {
      out += "0.";
      out.append(size_t(-decpt), '0');
      out += digits;
    } else if (size_t(decpt) >= digits.size()) {
      out += digits;
      out.append(size_t(decpt) - digits.size(), '0');
      out += ".0";
    } else {
      out += digits.substr(0, size_t(decpt));
      out += '.';
      out += digits.substr(size_t(decpt));
    }
  } else {
    out += digits[0];
    if (digits.size() > 1) {
      out += '.';
      out += digits.substr(1);
    }
    out += fmt::format("e{}{:02d}", exponent < 0 ? '-' : '+', std::abs(exponent));
  }
  return out;
}

namespace {

void append_string_repr(const std::string& s, std::string* out) {
  const bool has_single = s.find('\'') != std::string::npos;
  const bool has_double = s.find('"') != std::string::npos;
  const char quote = (has_single && !has_double) ? '"' : '\'';
  out->push_back(quote);
  size_t pos = 0;
  while (pos < s.size()) {
    char32_t cp = next_code_point(s, &pos);
    if (cp == char32_t(quote) || cp == '\\') {
      out->push_back('\\');
      out->push_back(char(cp));
    } else if (cp == '\t') {
      *out += "\\t";
    } else if (cp == '\n') {
      *out += "\\n";
    } else if (cp == '\r') {
      *out += "\\r";
    } else if (is_py_printable(cp)) {
      append_utf8(out, cp);
    } else if (cp <= 0xFF) {
      *out += fmt::format("\\x{:02x}", uint32_t(cp));
    } else if (cp <= 0xFFFF) {
      *out += fmt::format("\\u{:04x}", uint32_t(cp));
    } else {
      *out += fmt::format("\\U{:08x}", uint32_t(cp));
    }
  }
  out->push_back(quote);
}

void append_repr(const Value& v, std::string* out, int depth);

void append_items_repr(const std::vector<Value>& items, std::string* out, int depth) {
  for (size_t i = 0; i < items.size(); ++i) {
    if (i) *out += ", ";
    append_repr(items[i], out, depth + 1);
  }
}

void append_dict_repr(const Dict& d, std::string* out, int depth) {
  out->push_back('{');
  for (size_t i = 0; i < d.entries.size(); ++i) {
    if (i) *out += ", ";
    append_string_repr(d.entries[i].first, out);
    *out += ": ";
    append_repr(d.entries[i].second, out, depth + 1);
  }
  out->push_back('}');
}

void append_repr(const Value& v, std::string* out, int depth) {
  if (depth > kMaxNesting) {
    *out += "...";  // CPython prints a recursion marker in the same spirit
    return;
  }
  switch (v.kind()) {
    case ValueKind::kUndefined:
      *out += "Undefined";
      return;
    case ValueKind::kNone:
      *out += "None";
      return;
    case ValueKind::kBool:
      *out += v.as_bool() ? "True" : "False";
      return;
    case ValueKind::kInt:
      *out += std::to_string(v.as_int());
      return;
    case ValueKind::kFloat:
      *out += py_float_repr(v.as_double());
      return;
    case ValueKind::kString:
      append_string_repr(v.as_string(), out);
      return;
    case ValueKind::kList: {
      const List& l = v.as_list();
      switch (l.kind) {
        case SeqKind::kList:
          out->push_back('[');
          append_items_repr(l.items, out, depth);
          out->push_back(']');
          return;
        case SeqKind::kTuple:
          out->push_back('(');
          append_items_repr(l.items, out, depth);
          if (l.items.size() == 1) out->push_back(',');
          out->push_back(')');
          return;
        case SeqKind::kRange:
          *out += fmt::format("range({}, {}", l.range_start, l.range_stop);
          if (l.range_step != 1) *out += fmt::format(", {}", l.range_step);
          out->push_back(')');
          return;
        default:
          *out += py_type_name(v);
          *out += "([";
          append_items_repr(l.items, out, depth);
          *out += "])";
          return;
      }
    }
    case ValueKind::kDict:
      append_dict_repr(v.as_dict(), out, depth);
      return;
    case ValueKind::kNamespace:
      *out += "<Namespace ";
      append_dict_repr(v.as_namespace().attrs, out, depth);
      out->push_back('>');
      return;
    case ValueKind::kIterator:
      *out += fmt::format("<{} object>", v.as_iterator().type_name);
      return;
    case ValueKind::kCallable: {
      const Callable& c = v.as_callable();
      if (c.type == Callable::Type::kMacro) {
        *out += fmt::format("<Macro '{}'>", c.name);
      } else if (c.type == Callable::Type::kMethod) {
        *out += fmt::format("<built-in method {} of {} object>", c.name, py_type_name(c.receiver));
      } else {
        *out += fmt::format("<built-in function {}>", c.name);
      }
      return;
    }
    case ValueKind::kLoop: {
      const LoopState& s = v.as_loop();
      *out += fmt::format("<LoopContext {}/{}>", s.index0 + 1, s.items->size());
      return;
    }
  }
}

// Python json's string encoders (py_encode_basestring[_ascii]).
void append_json_string(const std::string& s, bool ensure_ascii, std::string* out) {
  out->push_back('"');
  size_t pos = 0;
  while (pos < s.size()) {
    char32_t cp = next_code_point(s, &pos);
    switch (cp) {
      case '"':
        *out += "\\\"";
        continue;
      case '\\':
        *out += "\\\\";
        continue;
      case '\n':
        *out += "\\n";
        continue;
      case '\r':
        *out += "\\r";
        continue;
      case '\t':
        *out += "\\t";
        continue;
      case '\b':
        *out += "\\b";
        continue;
      case '\f':
        *out += "\\f";
        continue;
      default:
        break;
    }
    if (cp < 0x20 || (ensure_ascii && cp >= 0x7F)) {
      if (cp >= 0x10000) {
        const char32_t v = cp - 0x10000;
        *out += fmt::format("\\u{:04x}\\u{:04x}", uint32_t(0xD800 | (v >> 10)), uint32_t(0xDC00 | (v & 0x3FF)));
      } else {
        *out += fmt::format("\\u{:04x}", uint32_t(cp));
      }
    } else {
      append_utf8(out, cp);
    }
  }
  out->push_back('"');
}

struct JsonWriter {
  const JsonDumpOptions& opt;
  std::string item_sep, key_sep;
  std::string* out;

  void newline(int level) {
    out->push_back('\n');
    for (int i = 0; i < level; ++i) *out += *opt.indent;
  }

  Status write(const Value& v, int level) {
    if (level > kMaxNesting) return errorf("tojson: value nested deeper than {} levels", kMaxNesting);
    switch (v.kind()) {
      case ValueKind::kNone:
        *out += "null";
        return {};
      case ValueKind::kBool:
        *out += v.as_bool() ? "true" : "false";
        return {};
      case ValueKind::kInt:
        *out += std::to_string(v.as_int());
        return {};
      case ValueKind::kFloat: {
        double f = v.as_double();
        if (std::isnan(f))
          *out += "NaN";
        else if (std::isinf(f))
          *out += f < 0 ? "-Infinity" : "Infinity";
        else
          *out += py_float_repr(f);
        return {};
      }
      case ValueKind::kString:
        append_json_string(v.as_string(), opt.ensure_ascii, out);
        return {};
      case ValueKind::kList: {
        const List& l = v.as_list();
        if (l.kind != SeqKind::kList && l.kind != SeqKind::kTuple) break;
        if (l.items.empty()) {
          *out += "[]";
          return {};
        }
        out->push_back('[');
        for (size_t i = 0; i < l.items.size(); ++i) {
          if (i) *out += item_sep;
          if (opt.indent) newline(level + 1);
          M2_RETURN_IF_ERROR(write(l.items[i], level + 1));
        }
        if (opt.indent) newline(level);
        out->push_back(']');
        return {};
      }
      case ValueKind::kDict: {
        const Dict& d = v.as_dict();
        if (d.entries.empty()) {
          *out += "{}";
          return {};
        }
        std::vector<const std::pair<std::string, Value>*> entries;
        for (const auto& e : d.entries) entries.push_back(&e);
        if (opt.sort_keys) {
          std::stable_sort(entries.begin(), entries.end(),
                           [](const auto* a, const auto* b) { return a->first < b->first; });
        }
        out->push_back('{');
        for (size_t i = 0; i < entries.size(); ++i) {
          if (i) *out += item_sep;
          if (opt.indent) newline(level + 1);
          append_json_string(entries[i]->first, opt.ensure_ascii, out);
          *out += key_sep;
          M2_RETURN_IF_ERROR(write(entries[i]->second, level + 1));
        }
        if (opt.indent) newline(level);
        out->push_back('}');
        return {};
      }
      default:
        break;
    }
    return errorf("Object of type {} is not JSON serializable", py_type_name(v));
  }
};

}  // namespace

void append_py_repr(const Value& v, std::string* out) { append_repr(v, out, 0); }

void append_py_str(const Value& v, std::string* out) {
  if (v.is_string()) {
    *out += v.as_string();
  } else if (!v.is_undefined()) {
    append_repr(v, out, 0);
  }
}

std::string py_str(const Value& v) {
  if (v.is_string()) return v.as_string();
  std::string out;
  append_py_str(v, &out);
  return out;
}

std::string py_repr(const Value& v) {
  std::string out;
  append_repr(v, &out, 0);
  return out;
}

Result<std::string> py_json_dumps(const Value& v, const JsonDumpOptions& options) {
  std::string out;
  JsonWriter w{options, options.item_separator.value_or(options.indent ? "," : ", "),
               options.key_separator.value_or(": "), &out};
  M2_RETURN_IF_ERROR(w.write(v, 0));
  return out;
}

}  // namespace m2::text::jinja
