// Global functions of Hugging Face's chat-template environment: Jinja's
// range/dict/namespace (with the sandbox's range limit and transformers'
// underscore check on namespace attributes) and transformers'
// raise_exception and strftime_now.
#include <fmt/format.h>

#include <ctime>

#include "text/jinja/builtin_util.h"
#include "text/jinja/builtins.h"
#include "text/jinja/ops.h"
#include "text/jinja/py_format.h"

namespace m2::text::jinja {
namespace {

// jinja2.sandbox.MAX_RANGE
constexpr int64_t kMaxRange = 100000;

Result<Value> g_range(const CallArgs& a) {
  if (!a.keywords.empty()) return errorf("range() takes no keyword arguments");
  if (a.positional.empty() || a.positional.size() > 3) {
    return errorf("range expected 1 to 3 arguments, got {}", a.positional.size());
  }
  int64_t v[3] = {0, 0, 1};
  for (size_t i = 0; i < a.positional.size(); ++i) {
    const Value& x = a.positional[i];
    if (x.is_undefined()) return undefined_error(x);
    if (!x.is_integral()) return errorf("'{}' object cannot be interpreted as an integer", py_type_name(x));
  }
  if (a.positional.size() == 1) {
    v[1] = a.positional[0].as_int();
  } else {
    v[0] = a.positional[0].as_int();
    v[1] = a.positional[1].as_int();
    if (a.positional.size() == 3) v[2] = a.positional[2].as_int();
  }
  if (v[2] == 0) return errorf("range() arg 3 must not be zero");
  const int64_t start = v[0], stop = v[1], step = v[2];
  int64_t n = 0;
  if (step > 0 && stop > start) n = (stop - start - 1) / step + 1;
  if (step < 0 && stop < start) n = (start - stop - 1) / -step + 1;
  if (n > kMaxRange) {
    return errorf("Range too big. The sandbox blocks ranges larger than MAX_RANGE ({}).", kMaxRange);
  }
  List l;
  l.kind = SeqKind::kRange;
  l.range_start = start;
  l.range_stop = stop;
  l.range_step = step;
  l.items.reserve(size_t(n));
  for (int64_t i = 0; i < n; ++i) l.items.push_back(Value::integer(start + i * step));
  return Value::list(std::move(l));
}

// dict(*args, **kwargs): a mapping or an iterable of pairs, then keywords.
Result<Dict> make_dict(const CallArgs& a, const char* function) {
  if (a.positional.size() > 1) return errorf("{} expected at most 1 argument, got {}", function, a.positional.size());
  Dict d;
  if (!a.positional.empty()) {
    const Value& src = a.positional[0];
    if (src.is_dict()) {
      d = src.as_dict();
    } else {
      M2_ASSIGN_OR_RETURN(auto items, py_iterate(src));
      for (size_t i = 0; i < items.size(); ++i) {
        M2_ASSIGN_OR_RETURN(auto pair, py_iterate(items[i]));
        if (pair.size() != 2) {
          return errorf("dictionary update sequence element #{} has length {}; 2 is required", i, pair.size());
        }
        if (!pair[0].is_string())
          return errorf("dict keys must be strings in chat templates, got {}", py_type_name(pair[0]));
        d.set(pair[0].as_string(), pair[1]);
      }
    }
  }
  for (const auto& [k, v] : a.keywords) d.set(k, v);
  return d;
}

Result<Value> g_dict(const CallArgs& a) {
  M2_ASSIGN_OR_RETURN(Dict d, make_dict(a, "dict"));
  return Value::dict(std::move(d));
}

Result<Value> g_namespace(const CallArgs& a) {
  M2_ASSIGN_OR_RETURN(Dict d, make_dict(a, "namespace"));
  for (const auto& [k, v] : d.entries) {
    if (k.starts_with("_")) {
      return errorf(
          "Chat templates cannot store underscore-prefixed attributes on a namespace, but got '{}'. Please rename "
          "the attribute.",
          k);
    }
  }
  return Value::namespace_object(std::move(d));
}

Result<Value> g_raise_exception(const CallArgs& a) {
  Params p;
  M2_RETURN_IF_ERROR(bind_args("raise_exception", a, {"message"}, &p));
  if (!p[0]) return errorf("raise_exception() missing 1 required positional argument: 'message'");
  return Status::error(py_str(*p[0]));
}

Result<Value> g_strftime_now(const CallArgs& a) {
  Params p;
  M2_RETURN_IF_ERROR(bind_args("strftime_now", a, {"format"}, &p));
  M2_ASSIGN_OR_RETURN(std::string format, string_arg(p[0], "strftime_now format"));
  std::time_t now = std::time(nullptr);
  std::tm local{};
  localtime_r(&now, &local);
  std::string out(256 + format.size() * 8, '\0');
  size_t n = std::strftime(out.data(), out.size(), format.c_str(), &local);
  if (n == 0 && !format.empty()) return errorf("strftime_now: result too long or invalid format '{}'", format);
  out.resize(n);
  return Value::string(std::move(out));
}

struct GlobalEntry {
  const char* name;
  GlobalFn fn;
};

constexpr GlobalEntry kGlobals[] = {
    {"range", g_range},
    {"dict", g_dict},
    {"namespace", g_namespace},
    {"raise_exception", g_raise_exception},
    {"strftime_now", g_strftime_now},
};

}  // namespace

GlobalFn find_global(std::string_view name) {
  for (const auto& g : kGlobals) {
    if (name == g.name) return g.fn;
  }
  return nullptr;
}

}  // namespace m2::text::jinja
