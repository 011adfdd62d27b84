// Jinja's built-in filters over sequences (jinja2/filters.py): sort,
// dictsort, unique, map, select/reject(attr), join, first/last, min/max, sum,
// batch, list, items, reverse. Filters that return generators in Jinja (map,
// select, reject, selectattr, rejectattr, unique, items, batch, reverse of a
// list) return single-use iterators here too, so `{% if xs|select(...) %}` is
// always true and a second loop over the same result is empty, as in Jinja.
#include <fmt/format.h>

#include <algorithm>
#include <utility>

#include "text/jinja/builtin_util.h"
#include "text/jinja/builtins.h"
#include "text/jinja/ops.h"
#include "text/jinja/py_format.h"
#include "text/jinja/unicode.h"

namespace m2::text::jinja {
namespace {

bool flag(const Value* v, bool def) { return v ? v->truthy() : def; }

Result<Value> f_batch(const Value& v, const CallArgs& a) {
  Params p;
  M2_RETURN_IF_ERROR(bind_args("batch", a, {"linecount", "fill_with"}, &p));
  if (!p[0]) return errorf("batch() missing required argument 'linecount'");
  M2_ASSIGN_OR_RETURN(int64_t n, int_arg(p[0], 0, "batch linecount"));
  if (n <= 0) return errorf("batch linecount must be positive");
  M2_ASSIGN_OR_RETURN(auto items, py_iterate(v));
  std::vector<Value> batches, cur;
  for (auto& item : items) {
    if (int64_t(cur.size()) == n) {
      batches.push_back(Value::list(std::move(cur)));
      cur.clear();
    }
    cur.push_back(std::move(item));
  }
  if (!cur.empty()) {
    if (p[1] && !p[1]->is_none()) {
      while (int64_t(cur.size()) < n) cur.push_back(*p[1]);
    }
    batches.push_back(Value::list(std::move(cur)));
  }
  return Value::iterator(std::move(batches), "generator");
}

Result<Value> sort_values(std::vector<Value> items, const std::vector<Value>& keys, bool reverse) {
  std::vector<size_t> order(items.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  Status error;
  // Python's sorted() is stable in both directions; the first failed
  // comparison becomes the TypeError Python would raise.
  std::stable_sort(order.begin(), order.end(), [&](size_t x, size_t y) {
    if (!error.ok()) return false;
    auto r = reverse ? py_order(ast::CmpOp::kLt, keys[y], keys[x]) : py_order(ast::CmpOp::kLt, keys[x], keys[y]);
    if (!r.ok()) {
      error = r.status();
      return false;
    }
    return r.value();
  });
  M2_RETURN_IF_ERROR(error);
  std::vector<Value> out;
  out.reserve(items.size());
  for (size_t i : order) out.push_back(std::move(items[i]));
  return Value::list(std::move(out));
}

Result<Value> f_dictsort(const Value& v, const CallArgs& a) {
  Params p;
  M2_RETURN_IF_ERROR(bind_args("dictsort", a, {"case_sensitive", "by", "reverse"}, &p));
  if (v.is_undefined()) return undefined_error(v);
  if (!v.is_dict()) return errorf("'{}' object has no attribute 'items'", py_type_name(v));
  std::string by = "key";
  if (p[1]) {
    M2_ASSIGN_OR_RETURN(by, string_arg(p[1], "dictsort by"));
  }
  if (by != "key" && by != "value") return errorf("You can only sort by either \"key\" or \"value\"");
  std::vector<Value> items, keys;
  for (const auto& [k, val] : v.as_dict().entries) {
    items.push_back(Value::list({Value::string(k), val}, SeqKind::kTuple));
    Value key = by == "key" ? Value::string(k) : val;
    keys.push_back(flag(p[0], false) ? key : ignore_case(key));
  }
  return sort_values(std::move(items), keys, flag(p[2], false));
}

Result<Value> f_first(const Value& v, const CallArgs& a) {
  Params p;
  M2_RETURN_IF_ERROR(bind_args("first", a, {}, &p));
  if (v.kind() == ValueKind::kIterator) {
    Iterator& it = v.as_iterator();
    if (it.next < it.items.size()) return it.items[it.next++];
  } else {
    M2_ASSIGN_OR_RETURN(auto items, py_iterate(v));
    if (!items.empty()) return items.front();
  }
  return Value::undefined("No first item, sequence was empty.");
}

Result<Value> f_last(const Value& v, const CallArgs& a) {
  Params p;
  M2_RETURN_IF_ERROR(bind_args("last", a, {}, &p));
  if (v.kind() == ValueKind::kIterator) return errorf("'{}' object is not reversible", py_type_name(v));
  M2_ASSIGN_OR_RETURN(auto items, py_iterate(v));
  if (!items.empty()) return items.back();
  return Value::undefined("No last item, sequence was empty.");
}

Result<Value> f_items(const Value& v, const CallArgs& a) {
  Params p;
  M2_RETURN_IF_ERROR(bind_args("items", a, {}, &p));
  if (v.is_undefined()) return Value::iterator({}, "generator");
  if (!v.is_dict()) return errorf("Can only get item pairs from a mapping.");
  std::vector<Value> items;
  for (const auto& [k, val] : v.as_dict().entries)
    items.push_back(Value::list({Value::string(k), val}, SeqKind::kTuple));
  return Value::iterator(std::move(items), "generator");
}

Result<Value> f_join(const Value& v, const CallArgs& a) {
  Params p;
  M2_RETURN_IF_ERROR(bind_args("join", a, {"d", "attribute"}, &p));
  const std::string sep = p[0] ? py_str(*p[0]) : "";
  M2_ASSIGN_OR_RETURN(auto items, py_iterate(v));
  std::vector<Value> path;
  if (p[1] && !p[1]->is_none()) path = attribute_path(*p[1]);
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) {
    if (i) out += sep;
    if (!path.empty()) {
      M2_ASSIGN_OR_RETURN(Value x, follow_attribute_path(path, items[i], nullptr));
      append_py_str(x, &out);
    } else {
      append_py_str(items[i], &out);
    }
  }
  return Value::string(std::move(out));
}

Result<Value> f_list(const Value& v, const CallArgs& a) {
  Params p;
  M2_RETURN_IF_ERROR(bind_args("list", a, {}, &p));
  M2_ASSIGN_OR_RETURN(auto items, py_iterate(v));
  return Value::list(std::move(items));
}

const Value* keyword(const CallArgs& a, std::string_view name) {
  for (const auto& [k, v] : a.keywords) {
    if (k == name) return &v;
  }
  return nullptr;
}

Result<Value> f_map(const Value& v, const CallArgs& a) {
  std::vector<Value> out;
  if (!v.truthy()) return Value::iterator({}, "generator");
  M2_ASSIGN_OR_RETURN(auto items, py_iterate(v));
  if (a.positional.empty() && keyword(a, "attribute")) {
    const Value* def = keyword(a, "default");
    for (const auto& [k, val] : a.keywords) {
      if (k != "attribute" && k != "default") return errorf("Unexpected keyword argument '{}'", k);
    }
    const std::vector<Value> path = attribute_path(*keyword(a, "attribute"));
    for (const Value& item : items) {
      M2_ASSIGN_OR_RETURN(Value x, follow_attribute_path(path, item, def));
      out.push_back(std::move(x));
    }
    return Value::iterator(std::move(out), "generator");
  }
  if (a.positional.empty()) return errorf("map requires a filter argument");
  M2_ASSIGN_OR_RETURN(std::string name, string_arg(&a.positional[0], "map filter name"));
  ast::FilterFn fn = find_filter(name);
  if (!fn) return errorf("No filter named '{}'", name);
  CallArgs rest{{a.positional.begin() + 1, a.positional.end()}, a.keywords};
  for (const Value& item : items) {
    M2_ASSIGN_OR_RETURN(Value x, fn(item, rest));
    out.push_back(std::move(x));
  }
  return Value::iterator(std::move(out), "generator");
}

Result<Value> min_or_max(const Value& v, const CallArgs& a, const char* name, bool want_max) {
  Params p;
  M2_RETURN_IF_ERROR(bind_args(name, a, {"case_sensitive", "attribute"}, &p));
  M2_ASSIGN_OR_RETURN(auto items, py_iterate(v));
  if (items.empty()) return Value::undefined("No aggregated item, sequence was empty.");
  std::vector<Value> path;
  if (p[1] && !p[1]->is_none()) path = attribute_path(*p[1]);
  auto key = [&](const Value& item) -> Result<Value> {
    M2_ASSIGN_OR_RETURN(Value k, follow_attribute_path(path, item, nullptr));
    return flag(p[0], false) ? k : ignore_case(k);
  };
  size_t best = 0;
  M2_ASSIGN_OR_RETURN(Value best_key, key(items[0]));
  for (size_t i = 1; i < items.size(); ++i) {
    M2_ASSIGN_OR_RETURN(Value k, key(items[i]));
    // Python's min/max keep the first of equal elements.
    M2_ASSIGN_OR_RETURN(bool better,
                        want_max ? py_order(ast::CmpOp::kGt, k, best_key) : py_order(ast::CmpOp::kLt, k, best_key));
    if (better) {
      best = i;
      best_key = k;
    }
  }
  return items[best];
}

Result<Value> f_max(const Value& v, const CallArgs& a) { return min_or_max(v, a, "max", true); }

Result<Value> f_min(const Value& v, const CallArgs& a) { return min_or_max(v, a, "min", false); }

Result<Value> select_or_reject(const Value& v, const CallArgs& a, bool select, bool by_attr) {
  if (!v.truthy()) return Value::iterator({}, "generator");
  M2_ASSIGN_OR_RETURN(auto items, py_iterate(v));
  size_t off = 0;
  std::vector<Value> path;
  if (by_attr) {
    if (a.positional.empty()) return errorf("Missing parameter for attribute name");
    path = attribute_path(a.positional[0]);
    off = 1;
  }
  ast::TestFn test = nullptr;
  CallArgs rest;
  if (a.positional.size() > off) {
    M2_ASSIGN_OR_RETURN(std::string name, string_arg(&a.positional[off], "test name"));
    test = find_test(name);
    if (!test) return errorf("No test named '{}'", name);
    rest.positional.assign(a.positional.begin() + std::ptrdiff_t(off + 1), a.positional.end());
    rest.keywords = a.keywords;
  }
  std::vector<Value> out;
  for (Value& item : items) {
    Value x = item;
    if (by_attr) {
      M2_ASSIGN_OR_RETURN(x, follow_attribute_path(path, item, nullptr));
    }
    bool ok = false;
    if (test) {
      M2_ASSIGN_OR_RETURN(ok, test(x, rest));
    } else {
      ok = x.truthy();
    }
    if (ok == select) out.push_back(std::move(item));
  }
  return Value::iterator(std::move(out), "generator");
}

Result<Value> f_select(const Value& v, const CallArgs& a) { return select_or_reject(v, a, true, false); }

Result<Value> f_reject(const Value& v, const CallArgs& a) { return select_or_reject(v, a, false, false); }

Result<Value> f_selectattr(const Value& v, const CallArgs& a) { return select_or_reject(v, a, true, true); }

Result<Value> f_rejectattr(const Value& v, const CallArgs& a) { return select_or_reject(v, a, false, true); }

Result<Value> f_reverse(const Value& v, const CallArgs& a) {
  Params p;
  M2_RETURN_IF_ERROR(bind_args("reverse", a, {}, &p));
  if (v.is_string()) {
    std::u32string cps = to_code_points(v.as_string());
    std::reverse(cps.begin(), cps.end());
    return Value::string(from_code_points(cps.data(), cps.data() + cps.size()));
  }
  if (v.is_undefined()) return Value::iterator({}, "reversed");
  M2_ASSIGN_OR_RETURN(auto items, py_iterate(v));
  std::reverse(items.begin(), items.end());
  if (v.kind() == ValueKind::kIterator) return Value::list(std::move(items));  // list(value) reversed
  if (v.is_dict()) return Value::iterator(std::move(items), "dict_reversekeyiterator");
  return Value::iterator(std::move(items), v.is_list_kind(SeqKind::kRange) ? "range_iterator" : "list_reverseiterator");
}

Result<Value> f_sort(const Value& v, const CallArgs& a) {
  Params p;
  M2_RETURN_IF_ERROR(bind_args("sort", a, {"reverse", "case_sensitive", "attribute"}, &p));
  M2_ASSIGN_OR_RETURN(auto items, py_iterate(v));
  const bool case_sensitive = flag(p[1], false);
  // "age,name" sorts by several attributes: the key is then a list.
  std::vector<std::vector<Value>> paths;
  if (p[2] && !p[2]->is_none()) {
    if (p[2]->is_string()) {
      const std::string& s = p[2]->as_string();
      size_t start = 0;
      while (true) {
        size_t comma = s.find(',', start);
        paths.push_back(
            attribute_path(Value::string(s.substr(start, comma == std::string::npos ? comma : comma - start))));
        if (comma == std::string::npos) break;
        start = comma + 1;
      }
    } else {
      paths.push_back(attribute_path(*p[2]));
    }
  }
  std::vector<Value> keys;
  keys.reserve(items.size());
  for (const Value& item : items) {
    std::vector<Value> parts;
    if (paths.empty()) parts.push_back(item);
    for (const auto& path : paths) {
      M2_ASSIGN_OR_RETURN(Value k, follow_attribute_path(path, item, nullptr));
      parts.push_back(std::move(k));
    }
    for (Value& k : parts) k = case_sensitive ? k : ignore_case(k);
    keys.push_back(paths.empty() ? parts[0] : Value::list(std::move(parts)));
  }
  return sort_values(std::move(items), keys, flag(p[0], false));
}

Result<Value> f_sum(const Value& v, const CallArgs& a) {
  Params p;
  M2_RETURN_IF_ERROR(bind_args("sum", a, {"attribute", "start"}, &p));
  M2_ASSIGN_OR_RETURN(auto items, py_iterate(v));
  Value total = p[1] ? *p[1] : Value::integer(0);
  if (total.is_string()) return errorf("sum() can't sum strings [use ''.join(seq) instead]");
  std::vector<Value> path;
  if (p[0] && !p[0]->is_none()) path = attribute_path(*p[0]);
  for (const Value& item : items) {
    M2_ASSIGN_OR_RETURN(Value x, follow_attribute_path(path, item, nullptr));
    M2_ASSIGN_OR_RETURN(total, py_binary(ast::BinOp::kAdd, total, x));
  }
  return total;
}

Result<Value> f_unique(const Value& v, const CallArgs& a) {
  Params p;
  M2_RETURN_IF_ERROR(bind_args("unique", a, {"case_sensitive", "attribute"}, &p));
  M2_ASSIGN_OR_RETURN(auto items, py_iterate(v));
  std::vector<Value> path;
  if (p[1] && !p[1]->is_none()) path = attribute_path(*p[1]);
  std::vector<Value> seen, out;
  for (Value& item : items) {
    M2_ASSIGN_OR_RETURN(Value key, follow_attribute_path(path, item, nullptr));
    if (!flag(p[0], false)) key = ignore_case(key);
    if (key.is_dict() || key.is_list_kind(SeqKind::kList) || key.is_undefined()) {
      return errorf("unhashable type: '{}'", py_type_name(key));
    }
    if (std::any_of(seen.begin(), seen.end(), [&](const Value& s) { return py_equal(s, key); })) continue;
    seen.push_back(std::move(key));
    out.push_back(std::move(item));
  }
  return Value::iterator(std::move(out), "generator");
}

struct FilterEntry {
  const char* name;
  ast::FilterFn fn;
};

constexpr FilterEntry kSequenceFilters[] = {
    {"batch", f_batch},     {"dictsort", f_dictsort}, {"first", f_first},
    {"items", f_items},     {"join", f_join},         {"last", f_last},
    {"list", f_list},       {"map", f_map},           {"max", f_max},
    {"min", f_min},         {"reject", f_reject},     {"rejectattr", f_rejectattr},
    {"reverse", f_reverse}, {"select", f_select},     {"selectattr", f_selectattr},
    {"sort", f_sort},       {"sum", f_sum},           {"unique", f_unique},
};

}  // namespace

ast::FilterFn find_sequence_filter(std::string_view name) {
  for (const auto& f : kSequenceFilters) {
    if (name == f.name) return f.fn;
  }
  return nullptr;
}

}  // namespace m2::text::jinja
