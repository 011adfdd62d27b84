// Python methods that templates call on values: str (strip, split,
// startswith, replace, ...), dict (items, keys, values, get), list/tuple
// (index, count) and the loop object (cycle, changed). Mutating methods are
// refused like Hugging Face's ImmutableSandboxedEnvironment refuses them;
// other Python methods we do not implement fail with a message saying so.
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <charconv>

#include "text/jinja/builtin_util.h"
#include "text/jinja/builtins.h"
#include "text/jinja/ops.h"
#include "text/jinja/py_format.h"
#include "text/jinja/unicode.h"

namespace m2::text::jinja {
namespace {

using namespace std::string_view_literals;

// string_view constants: comparing against them checks the length first,
// which keeps the per-attribute method lookup cheap.
constexpr std::array kStrImplemented = {
    "capitalize"sv, "count"sv,        "endswith"sv,     "find"sv,       "format"sv,  "index"sv,  "isalnum"sv,
    "isalpha"sv,    "isdigit"sv,      "islower"sv,      "isspace"sv,    "isupper"sv, "join"sv,   "lower"sv,
    "lstrip"sv,     "removeprefix"sv, "removesuffix"sv, "replace"sv,    "rfind"sv,   "rindex"sv, "rsplit"sv,
    "rstrip"sv,     "split"sv,        "splitlines"sv,   "startswith"sv, "strip"sv,   "title"sv,  "upper"sv};
constexpr std::array kStrOther = {"casefold"sv,   "center"sv,    "encode"sv,       "expandtabs"sv, "format_map"sv,
                                  "isascii"sv,    "isdecimal"sv, "isidentifier"sv, "isnumeric"sv,  "isprintable"sv,
                                  "istitle"sv,    "ljust"sv,     "maketrans"sv,    "partition"sv,  "rjust"sv,
                                  "rpartition"sv, "swapcase"sv,  "translate"sv,    "zfill"sv};
constexpr std::array kDictAllowed = {"copy"sv, "get"sv, "items"sv, "keys"sv, "values"sv};
constexpr std::array kDictUnsafe = {"clear"sv, "pop"sv, "popitem"sv, "setdefault"sv, "update"sv};
constexpr std::array kListAllowed = {"copy"sv, "count"sv, "index"sv};
constexpr std::array kListUnsafe = {"append"sv, "clear"sv,  "extend"sv,  "insert"sv,
                                    "pop"sv,    "remove"sv, "reverse"sv, "sort"sv};

template <size_t N>
bool contains(const std::array<std::string_view, N>& names, std::string_view name) {
  return std::any_of(names.begin(), names.end(), [&](std::string_view n) { return name == n; });
}

// Python str.split / rsplit. With no separator: runs of whitespace, ends
// ignored; maxsplit < 0 means no limit.
std::vector<Value> split(const std::string& s, const std::string* sep, int64_t maxsplit, bool from_right) {
  std::vector<std::string> parts;
  if (sep) {
    if (!from_right) {
      size_t pos = 0;
      while (maxsplit < 0 || int64_t(parts.size()) < maxsplit) {
        size_t hit = s.find(*sep, pos);
        if (hit == std::string::npos) break;
        parts.push_back(s.substr(pos, hit - pos));
        pos = hit + sep->size();
      }
      parts.push_back(s.substr(pos));
    } else {
      size_t end = s.size();
      while (maxsplit < 0 || int64_t(parts.size()) < maxsplit) {
        if (end < sep->size()) break;
        size_t hit = s.rfind(*sep, end - sep->size());
        if (hit == std::string::npos) break;
        parts.push_back(s.substr(hit + sep->size(), end - hit - sep->size()));
        end = hit;
      }
      parts.push_back(s.substr(0, end));
      std::reverse(parts.begin(), parts.end());
    }
  } else {
    std::u32string cps = to_code_points(s);
    auto sp = [](char32_t c) { return is_py_space(c); };
    if (!from_right) {
      size_t i = 0;
      while (true) {
        while (i < cps.size() && sp(cps[i])) ++i;
        if (i >= cps.size()) break;
        if (maxsplit >= 0 && int64_t(parts.size()) == maxsplit) {
          size_t end = cps.size();
          parts.push_back(from_code_points(&cps[i], cps.data() + end));
          break;
        }
        size_t j = i;
        while (j < cps.size() && !sp(cps[j])) ++j;
        parts.push_back(from_code_points(&cps[i], cps.data() + j));
        i = j;
      }
    } else {
      size_t i = cps.size();
      while (true) {
        while (i > 0 && sp(cps[i - 1])) --i;
        if (i == 0) break;
        if (maxsplit >= 0 && int64_t(parts.size()) == maxsplit) {
          parts.push_back(from_code_points(cps.data(), cps.data() + i));
          break;
        }
        size_t j = i;
        while (j > 0 && !sp(cps[j - 1])) --j;
        parts.push_back(from_code_points(cps.data() + j, cps.data() + i));
        i = j;
      }
      std::reverse(parts.begin(), parts.end());
    }
  }
  std::vector<Value> out;
  out.reserve(parts.size());
  for (auto& p : parts) out.push_back(Value::string(std::move(p)));
  return out;
}

// Prefix/suffix argument: a string or a tuple of strings.
Result<bool> affix_match(const std::string& s, const Value& affix, bool prefix, const char* name) {
  auto one = [&](const Value& x) -> Result<bool> {
    if (!x.is_string()) {
      return errorf("{} first arg must be str or a tuple of str, not {}", name, py_type_name(x));
    }
    const std::string& a = x.as_string();
    return prefix ? s.starts_with(a) : s.ends_with(a);
  };
  if (affix.is_list_kind(SeqKind::kTuple)) {
    for (const Value& x : affix.as_list().items) {
      M2_ASSIGN_OR_RETURN(bool m, one(x));
      if (m) return true;
    }
    return false;
  }
  return one(affix);
}

// Code-point index of a byte offset (find() results are code-point based).
int64_t cp_index(const std::string& s, size_t byte_offset) {
  return int64_t(code_point_count(std::string_view(s).substr(0, byte_offset)));
}

// str.format with auto/explicit positional and keyword fields, `{{`/`}}`
// escapes and !s/!r conversions; format specs are refused.
Result<Value> str_format(const std::string& fmt_str, const CallArgs& a) {
  std::string out;
  size_t auto_index = 0;
  for (size_t i = 0; i < fmt_str.size(); ++i) {
    char c = fmt_str[i];
    if (c == '}') {
      if (i + 1 < fmt_str.size() && fmt_str[i + 1] == '}') {
        out.push_back('}');
        ++i;
        continue;
      }
      return errorf("Single '}}' encountered in format string");
    }
    if (c != '{') {
      out.push_back(c);
      continue;
    }
    if (i + 1 < fmt_str.size() && fmt_str[i + 1] == '{') {
      out.push_back('{');
      ++i;
      continue;
    }
    size_t close = fmt_str.find('}', i);
    if (close == std::string::npos) return errorf("Single '{{' encountered in format string");
    std::string field = fmt_str.substr(i + 1, close - i - 1);
    char conversion = 's';
    if (size_t bang = field.find('!'); bang != std::string::npos) {
      if (bang + 2 != field.size()) return errorf("format field conversions must be !s or !r");
      conversion = field[bang + 1];
      field.resize(bang);
    }
    if (field.find(':') != std::string::npos || field.find('.') != std::string::npos ||
        field.find('[') != std::string::npos) {
      return errorf("str.format: format specs and attribute lookups are not supported ('{{{}}}')", field);
    }
    const Value* arg = nullptr;
    if (field.empty() || std::all_of(field.begin(), field.end(), [](char d) { return d >= '0' && d <= '9'; })) {
      size_t index = auto_index;
      if (field.empty()) {
        ++auto_index;
      } else if (std::from_chars(field.data(), field.data() + field.size(), index).ec != std::errc()) {
        return errorf("Replacement index {} out of range", field);
      }
      if (index >= a.positional.size()) return errorf("Replacement index {} out of range", index);
      arg = &a.positional[index];
    } else {
      for (const auto& [k, v] : a.keywords) {
        if (k == field) arg = &v;
      }
      if (!arg) return errorf("KeyError: '{}'", field);
    }
    if (conversion == 'r')
      append_py_repr(*arg, &out);
    else
      append_py_str(*arg, &out);
    i = close;
  }
  return Value::string(std::move(out));
}

template <typename Pred>
Result<Value> str_predicate(const std::string& s, Pred pred) {
  if (s.empty()) return Value::boolean(false);
  size_t pos = 0;
  while (pos < s.size()) {
    if (!pred(next_code_point(s, &pos))) return Value::boolean(false);
  }
  return Value::boolean(true);
}

Result<Value> call_str_method(const std::string& s, std::string_view name, const CallArgs& a) {
  Params p;
  auto opt_string = [&](const Value* v, std::string* out) -> Result<bool> {
    if (!v || v->is_none()) return false;
    M2_ASSIGN_OR_RETURN(*out, string_arg(v, fmt::format("str.{}() argument", name)));
    return true;
  };
  if (name == "strip" || name == "lstrip" || name == "rstrip") {
    M2_RETURN_IF_ERROR(bind_args(name, a, {"chars"}, &p));
    std::string chars;
    M2_ASSIGN_OR_RETURN(bool has, opt_string(p[0], &chars));
    return Value::string(std::string(py_strip(s, has ? &chars : nullptr, name != "rstrip", name != "lstrip")));
  }
  if (name == "split" || name == "rsplit") {
    M2_RETURN_IF_ERROR(bind_args(name, a, {"sep", "maxsplit"}, &p));
    std::string sep;
    M2_ASSIGN_OR_RETURN(bool has, opt_string(p[0], &sep));
    if (has && sep.empty()) return errorf("empty separator");
    M2_ASSIGN_OR_RETURN(int64_t maxsplit, int_arg(p[1], -1, "maxsplit"));
    return Value::list(split(s, has ? &sep : nullptr, maxsplit, name == "rsplit"));
  }
  if (name == "splitlines") {
    M2_RETURN_IF_ERROR(bind_args(name, a, {"keepends"}, &p));
    if (p[0] && p[0]->truthy()) return errorf("str.splitlines(keepends=True) is not supported");
    std::vector<Value> lines;
    for (auto& line : py_splitlines(s)) lines.push_back(Value::string(std::move(line)));
    return Value::list(std::move(lines));
  }
  if (name == "startswith" || name == "endswith") {
    M2_RETURN_IF_ERROR(bind_args(name, a, {"affix"}, &p));
    if (!p[0]) return errorf("{}() takes at least 1 argument (0 given)", name);
    M2_ASSIGN_OR_RETURN(bool m,
                        affix_match(s, *p[0], name == "startswith", name == "startswith" ? "startswith" : "endswith"));
    return Value::boolean(m);
  }
  if (name == "upper" || name == "lower") {
    M2_RETURN_IF_ERROR(bind_args(name, a, {}, &p));
    return Value::string(name == "upper" ? to_upper(s) : to_lower(s));
  }
  if (name == "title" || name == "capitalize") {
    M2_RETURN_IF_ERROR(bind_args(name, a, {}, &p));
    std::string out;
    size_t pos = 0;
    bool prev_cased = false, first = true;
    while (pos < s.size()) {
      char32_t cp = next_code_point(s, &pos);
      if (name == "capitalize") {
        append_utf8(&out, first ? title_cp(cp) : lower_cp(cp));
      } else {
        const bool cased = case_class(cp) != 0;
        append_utf8(&out, cased ? (prev_cased ? lower_cp(cp) : title_cp(cp)) : cp);
        prev_cased = cased;
      }
      first = false;
    }
    return Value::string(std::move(out));
  }
  if (name == "replace") {
    M2_RETURN_IF_ERROR(bind_args(name, a, {"old", "new", "count"}, &p));
    M2_ASSIGN_OR_RETURN(std::string old_s, string_arg(p[0], "replace() old"));
    M2_ASSIGN_OR_RETURN(std::string new_s, string_arg(p[1], "replace() new"));
    M2_ASSIGN_OR_RETURN(int64_t count, int_arg(p[2], -1, "replace() count"));
    CallArgs fa{{Value::string(old_s), Value::string(new_s), Value::integer(count)}, {}};
    return find_filter("replace")(Value::string(s), fa);
  }
  if (name == "find" || name == "rfind" || name == "index" || name == "rindex" || name == "count") {
    M2_RETURN_IF_ERROR(bind_args(name, a, {"sub"}, &p));
    M2_ASSIGN_OR_RETURN(std::string sub, string_arg(p[0], fmt::format("{}() argument", name)));
    if (name == "count") {
      if (sub.empty()) return Value::integer(int64_t(code_point_count(s)) + 1);
      int64_t n = 0;
      for (size_t pos = s.find(sub); pos != std::string::npos; pos = s.find(sub, pos + sub.size())) ++n;
      return Value::integer(n);
    }
    size_t hit = (name == "find" || name == "index") ? s.find(sub) : s.rfind(sub);
    if (hit == std::string::npos) {
      if (name == "index" || name == "rindex") return errorf("substring not found");
      return Value::integer(-1);
    }
    return Value::integer(cp_index(s, hit));
  }
  if (name == "join") {
    M2_RETURN_IF_ERROR(bind_args(name, a, {"iterable"}, &p));
    if (!p[0]) return errorf("join() takes exactly one argument (0 given)");
    M2_ASSIGN_OR_RETURN(auto items, py_iterate(*p[0]));
    std::string out;
    for (size_t i = 0; i < items.size(); ++i) {
      if (!items[i].is_string()) {
        return errorf("sequence item {}: expected str instance, {} found", i, py_type_name(items[i]));
      }
      if (i) out += s;
      out += items[i].as_string();
    }
    return Value::string(std::move(out));
  }
  if (name == "removeprefix" || name == "removesuffix") {
    M2_RETURN_IF_ERROR(bind_args(name, a, {"affix"}, &p));
    M2_ASSIGN_OR_RETURN(std::string affix, string_arg(p[0], fmt::format("{}() argument", name)));
    if (name == "removeprefix" && s.starts_with(affix)) return Value::string(s.substr(affix.size()));
    if (name == "removesuffix" && s.ends_with(affix) && !affix.empty()) {
      return Value::string(s.substr(0, s.size() - affix.size()));
    }
    return Value::string(s);
  }
  if (name == "format") return str_format(s, a);
  M2_RETURN_IF_ERROR(bind_args(name, a, {}, &p));
  if (name == "isspace") return str_predicate(s, is_py_space);
  if (name == "isdigit") return str_predicate(s, is_py_digit);
  if (name == "isalpha") return str_predicate(s, is_py_alpha);
  if (name == "isalnum") return str_predicate(s, is_py_alnum);
  if (name == "islower" || name == "isupper") {
    M2_ASSIGN_OR_RETURN(bool m, find_test(name == "islower" ? "lower" : "upper")(Value::string(s), CallArgs{}));
    return Value::boolean(m);
  }
  return errorf("str.{}() is not supported by m2cpp's template interpreter", name);
}

Result<Value> call_dict_method(const Value& d, std::string_view name, const CallArgs& a) {
  Params p;
  if (name == "get") {
    M2_RETURN_IF_ERROR(bind_args("get", a, {"key", "default"}, &p));
    if (!p[0]) return errorf("get expected at least 1 argument, got 0");
    if (p[0]->is_string()) {
      if (const Value* v = d.as_dict().find(p[0]->as_string())) return *v;
    }
    return p[1] ? *p[1] : Value::none();
  }
  M2_RETURN_IF_ERROR(bind_args(name, a, {}, &p));
  if (name == "copy") return d;
  std::vector<Value> items;
  for (const auto& [k, v] : d.as_dict().entries) {
    if (name == "keys")
      items.push_back(Value::string(k));
    else if (name == "values")
      items.push_back(v);
    else
      items.push_back(Value::list({Value::string(k), v}, SeqKind::kTuple));
  }
  const SeqKind kind = name == "keys"     ? SeqKind::kDictKeys
                       : name == "values" ? SeqKind::kDictValues
                                          : SeqKind::kDictItems;
  return Value::list(std::move(items), kind);
}

Result<Value> call_list_method(const Value& l, std::string_view name, const CallArgs& a) {
  Params p;
  if (name == "copy") {
    M2_RETURN_IF_ERROR(bind_args(name, a, {}, &p));
    return l;
  }
  M2_RETURN_IF_ERROR(bind_args(name, a, {"value"}, &p));
  if (!p[0]) return errorf("{}() takes exactly one argument (0 given)", name);
  const auto& items = l.as_list().items;
  if (name == "count") {
    return Value::integer(
        int64_t(std::count_if(items.begin(), items.end(), [&](const Value& v) { return py_equal(v, *p[0]); })));
  }
  for (size_t i = 0; i < items.size(); ++i) {
    if (py_equal(items[i], *p[0])) return Value::integer(int64_t(i));
  }
  return errorf("{} is not in list", py_repr(*p[0]));
}

Result<Value> call_loop_method(const Value& loop, std::string_view name, const CallArgs& a) {
  LoopState& s = loop.as_loop();
  if (!a.keywords.empty()) return errorf("loop.{}() takes no keyword arguments", name);
  if (name == "cycle") {
    if (a.positional.empty()) return errorf("no items for cycling given");
    return a.positional[s.index0 % a.positional.size()];
  }
  // loop.changed(*values): true on the first call and whenever the values
  // differ from the previous call's.
  bool changed = !s.changed_called || s.last_changed.size() != a.positional.size();
  for (size_t i = 0; !changed && i < a.positional.size(); ++i) changed = !py_equal(s.last_changed[i], a.positional[i]);
  s.changed_called = true;
  s.last_changed = a.positional;
  return Value::boolean(changed);
}

}  // namespace

MethodKind method_kind(const Value& receiver, std::string_view name) {
  switch (receiver.kind()) {
    case ValueKind::kString:
      return contains(kStrImplemented, name) || contains(kStrOther, name) ? MethodKind::kAllowed : MethodKind::kNone;
    case ValueKind::kDict:
      if (contains(kDictAllowed, name)) return MethodKind::kAllowed;
      return contains(kDictUnsafe, name) ? MethodKind::kUnsafe : MethodKind::kNone;
    case ValueKind::kList: {
      const SeqKind k = receiver.as_list().kind;
      if (k != SeqKind::kList && k != SeqKind::kTuple && k != SeqKind::kRange) return MethodKind::kNone;
      if (name == "count" || name == "index") return MethodKind::kAllowed;
      if (k != SeqKind::kList) return MethodKind::kNone;
      if (contains(kListAllowed, name)) return MethodKind::kAllowed;
      return contains(kListUnsafe, name) ? MethodKind::kUnsafe : MethodKind::kNone;
    }
    case ValueKind::kLoop:
      return name == "cycle" || name == "changed" ? MethodKind::kAllowed : MethodKind::kNone;
    default:
      return MethodKind::kNone;
  }
}

Result<Value> call_method(const Value& receiver, std::string_view name, const CallArgs& args) {
  switch (receiver.kind()) {
    case ValueKind::kString:
      return call_str_method(receiver.as_string(), name, args);
    case ValueKind::kDict:
      return call_dict_method(receiver, name, args);
    case ValueKind::kList:
      return call_list_method(receiver, name, args);
    case ValueKind::kLoop:
      return call_loop_method(receiver, name, args);
    default:
      return errorf("'{}' object has no method '{}'", py_type_name(receiver), name);
  }
}

}  // namespace m2::text::jinja
