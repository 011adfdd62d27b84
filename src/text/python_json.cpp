#include "text/python_json.h"

#include <charconv>
#include <cmath>
#include <cstdio>

namespace m2::text {

void append_python_json_string(std::string_view utf8, std::string* out) {
  out->push_back('"');
  size_t run = 0;  // start of the pending run of characters written as is
  for (size_t i = 0; i < utf8.size(); ++i) {
    const auto c = static_cast<unsigned char>(utf8[i]);
    if (c >= 0x20 && c != '"' && c != '\\') continue;
    out->append(utf8.substr(run, i - run));
    run = i + 1;
    switch (c) {
      case '"': out->append("\\\""); break;
      case '\\': out->append("\\\\"); break;
      case '\n': out->append("\\n"); break;
      case '\r': out->append("\\r"); break;
      case '\t': out->append("\\t"); break;
      case '\b': out->append("\\b"); break;
      case '\f': out->append("\\f"); break;
      default: {
        char buf[8];
        std::snprintf(buf, sizeof buf, "\\u%04x", c);
        out->append(buf);
      }
    }
  }
  out->append(utf8.substr(run));
  out->push_back('"');
}

std::string python_float_repr(double value) {
  // Shortest round-trip digits in scientific form, e.g. "-1.5e+16".
  char buf[64];
  const auto res = std::to_chars(buf, buf + sizeof buf, value, std::chars_format::scientific);
  std::string_view sci(buf, res.ptr - buf);
  std::string out;
  if (!sci.empty() && sci[0] == '-') {
    out.push_back('-');
    sci.remove_prefix(1);
  }
  const size_t e_pos = sci.find('e');
  std::string digits;
  for (char ch : sci.substr(0, e_pos)) {
    if (ch != '.') digits.push_back(ch);
  }
  int exp10 = 0;
  std::from_chars(sci.data() + e_pos + (sci[e_pos + 1] == '+' ? 2 : 1), sci.data() + sci.size(), exp10);
  // Python's repr: exponent form when exp10 < -4 or exp10 >= 16.
  if (exp10 < -4 || exp10 >= 16) {
    out.push_back(digits[0]);
    if (digits.size() > 1) {
      out.push_back('.');
      out.append(digits, 1);
    }
    char ebuf[16];
    std::snprintf(ebuf, sizeof ebuf, "e%c%02d", exp10 < 0 ? '-' : '+', exp10 < 0 ? -exp10 : exp10);
    out.append(ebuf);
    return out;
  }
  const int point = exp10 + 1;  // digits before the decimal point
  const int ndigits = static_cast<int>(digits.size());
  if (point <= 0) {
    out.append("0.");
    out.append(static_cast<size_t>(-point), '0');
    out.append(digits);
  } else if (point >= ndigits) {
    out.append(digits);
    out.append(static_cast<size_t>(point - ndigits), '0');
    out.append(".0");
  } else {
    out.append(digits, 0, point);
    out.push_back('.');
    out.append(digits, point);
  }
  return out;
}

namespace {

void dump_into(const OrderedJson& v, std::string* out) {
  switch (v.type()) {
    case OrderedJson::value_t::null: out->append("null"); break;
    case OrderedJson::value_t::boolean: out->append(v.get<bool>() ? "true" : "false"); break;
    case OrderedJson::value_t::number_integer: out->append(std::to_string(v.get<int64_t>())); break;
    case OrderedJson::value_t::number_unsigned: out->append(std::to_string(v.get<uint64_t>())); break;
    case OrderedJson::value_t::number_float: {
      const double d = v.get<double>();
      out->append(std::isfinite(d) ? python_float_repr(d) : "null");
      break;
    }
    case OrderedJson::value_t::string: append_python_json_string(v.get_ref<const std::string&>(), out); break;
    case OrderedJson::value_t::array: {
      out->push_back('[');
      bool first = true;
      for (const auto& item : v) {
        if (!first) out->append(", ");
        first = false;
        dump_into(item, out);
      }
      out->push_back(']');
      break;
    }
    case OrderedJson::value_t::object: {
      out->push_back('{');
      bool first = true;
      for (const auto& [key, item] : v.items()) {
        if (!first) out->append(", ");
        first = false;
        append_python_json_string(key, out);
        out->append(": ");
        dump_into(item, out);
      }
      out->push_back('}');
      break;
    }
    default: out->append("null"); break;  // binary / discarded: never produced by parsing text
  }
}

}  // namespace

std::string python_json_dumps(const OrderedJson& value) {
  std::string out;
  dump_into(value, &out);
  return out;
}

}  // namespace m2::text
