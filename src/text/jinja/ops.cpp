#include "text/jinja/ops.h"

#include <fmt/format.h>

#include <cmath>
#include <limits>
#include <optional>

#include "text/jinja/builtins.h"
#include "text/jinja/callable.h"
#include "text/jinja/py_format.h"
#include "text/jinja/unicode.h"

namespace m2::text::jinja {

using ast::BinOp;
using ast::CmpOp;

Status undefined_error(const Value& v) { return Status::error(v.undefined_message()); }

namespace {

bool seq_comparable(const Value& a, const Value& b) {
  return a.is_list() && b.is_list() && a.as_list().kind == b.as_list().kind;
}

bool equal(const Value& a, const Value& b, int depth) {
  if (depth > kMaxNesting) return false;
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) return a.as_double() == b.as_double();
    return a.as_int() == b.as_int();
  }
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case ValueKind::kUndefined:
    case ValueKind::kNone:
      return true;
    case ValueKind::kString:
      return a.as_string() == b.as_string();
    case ValueKind::kList: {
      const List& x = a.as_list();
      const List& y = b.as_list();
      if (x.kind != y.kind || x.items.size() != y.items.size()) return false;
      for (size_t i = 0; i < x.items.size(); ++i) {
        if (!equal(x.items[i], y.items[i], depth + 1)) return false;
      }
      return true;
    }
    case ValueKind::kDict: {
      const Dict& x = a.as_dict();
      const Dict& y = b.as_dict();
      if (x.entries.size() != y.entries.size()) return false;
      for (const auto& [k, v] : x.entries) {
        const Value* w = y.find(k);
        if (!w || !equal(v, *w, depth + 1)) return false;
      }
      return true;
    }
    default:
      return a.identity() == b.identity();
  }
}

Status type_error_order(CmpOp op, const Value& a, const Value& b) {
  static const char* const kOps[] = {"==", "!=", "<", "<=", ">", ">="};
  return errorf("'{}' not supported between instances of '{}' and '{}'", kOps[int(op)], py_type_name(a),
                py_type_name(b));
}

template <typename T>
bool apply_order(CmpOp op, const T& x, const T& y) {
  switch (op) {
    case CmpOp::kLt:
      return x < y;
    case CmpOp::kLe:
      return x <= y;
    case CmpOp::kGt:
      return x > y;
    default:
      return x >= y;
  }
}

Status unsupported_operands(const char* op, const Value& a, const Value& b) {
  return errorf("unsupported operand type(s) for {}: '{}' and '{}'", op, py_type_name(a), py_type_name(b));
}

Result<Value> checked_int(bool overflow, int64_t r) {
  if (overflow) return errorf("integer overflow (the template interpreter uses 64-bit integers)");
  return Value::integer(r);
}

// CPython's float floor division and modulo (sign follows the divisor).
double py_float_mod(double x, double y) {
  double mod = std::fmod(x, y);
  if (mod != 0.0) {
    if ((y < 0) != (mod < 0)) mod += y;
  } else {
    mod = std::copysign(0.0, y);
  }
  return mod;
}

double py_float_floordiv(double x, double y) {
  double mod = std::fmod(x, y);
  double div = (x - mod) / y;
  if (mod != 0.0 && ((y < 0) != (mod < 0))) div -= 1.0;
  if (div == 0.0) return std::copysign(0.0, x / y);
  double floordiv = std::floor(div);
  if (div - floordiv > 0.5) floordiv += 1.0;
  return floordiv;
}

Result<Value> repeat(const Value& seq, int64_t n) {
  constexpr size_t kMaxBytes = size_t(1) << 28;  // refuse absurd prompts early
  if (n < 0) n = 0;
  if (seq.is_string()) {
    const std::string& s = seq.as_string();
    if (!s.empty() && uint64_t(n) > kMaxBytes / s.size()) return errorf("string repetition result too large");
    std::string out;
    out.reserve(s.size() * size_t(n));
    for (int64_t i = 0; i < n; ++i) out += s;
    return Value::string(std::move(out));
  }
  const List& l = seq.as_list();
  if (!l.items.empty() && uint64_t(n) > kMaxBytes / 32 / l.items.size())
    return errorf("list repetition result too large");
  std::vector<Value> items;
  for (int64_t i = 0; i < n; ++i) items.insert(items.end(), l.items.begin(), l.items.end());
  return Value::list(std::move(items), l.kind);
}

Result<Value> arithmetic(BinOp op, const Value& a, const Value& b) {
  static const char* const kNames[] = {"+", "-", "*", "/", "//", "%", "** or pow()"};
  if (!a.is_number() || !b.is_number()) return unsupported_operands(kNames[int(op)], a, b);
  const bool ints = a.is_integral() && b.is_integral();
  if (ints) {
    const int64_t x = a.as_int(), y = b.as_int();
    int64_t r = 0;
    switch (op) {
      case BinOp::kAdd: {
        const bool overflow = __builtin_add_overflow(x, y, &r);
        return checked_int(overflow, r);
      }
      case BinOp::kSub: {
        const bool overflow = __builtin_sub_overflow(x, y, &r);
        return checked_int(overflow, r);
      }
      case BinOp::kMul: {
        const bool overflow = __builtin_mul_overflow(x, y, &r);
        return checked_int(overflow, r);
      }
      case BinOp::kDiv:
        if (y == 0) return errorf("division by zero");
        return Value::real(double(x) / double(y));
      case BinOp::kFloorDiv:
      case BinOp::kMod: {
        if (y == 0) return errorf("integer division or modulo by zero");
        if (x == std::numeric_limits<int64_t>::min() && y == -1) return checked_int(true, 0);
        int64_t q = x / y, m = x % y;
        if (m != 0 && ((m < 0) != (y < 0))) {
          --q;
          m += y;
        }
        return Value::integer(op == BinOp::kFloorDiv ? q : m);
      }
      case BinOp::kPow: {
        if (y < 0) {
          if (x == 0) return errorf("0.0 cannot be raised to a negative power");
          return Value::real(std::pow(double(x), double(y)));
        }
        int64_t result = 1, base = x, e = y;
        bool overflow = false;
        while (e > 0 && !overflow) {
          if (e & 1) overflow |= __builtin_mul_overflow(result, base, &result);
          e >>= 1;
          if (e > 0) overflow |= __builtin_mul_overflow(base, base, &base);
        }
        return checked_int(overflow, result);
      }
    }
  }
  const double x = a.as_double(), y = b.as_double();
  switch (op) {
    case BinOp::kAdd:
      return Value::real(x + y);
    case BinOp::kSub:
      return Value::real(x - y);
    case BinOp::kMul:
      return Value::real(x * y);
    case BinOp::kDiv:
      if (y == 0) return errorf("float division by zero");
      return Value::real(x / y);
    case BinOp::kFloorDiv:
      if (y == 0) return errorf("float floor division by zero");
      return Value::real(py_float_floordiv(x, y));
    case BinOp::kMod:
      if (y == 0) return errorf("float modulo");
      return Value::real(py_float_mod(x, y));
    case BinOp::kPow:
      if (x == 0 && y < 0) return errorf("0.0 cannot be raised to a negative power");
      if (x < 0 && y != std::floor(y)) return errorf("negative number cannot be raised to a fractional power");
      return Value::real(std::pow(x, y));
  }
  return errorf("unknown operator");
}

int64_t clamp_index(int64_t i, int64_t len, int64_t lower, int64_t upper) {
  if (i < 0) i += len;
  if (i < lower) return lower;
  if (i > upper) return upper;
  return i;
}

}  // namespace

bool py_equal(const Value& a, const Value& b) { return equal(a, b, 0); }

Result<bool> py_order(CmpOp op, const Value& a, const Value& b) {
  if (a.is_undefined()) return undefined_error(a);
  if (b.is_undefined()) return undefined_error(b);
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) return apply_order(op, a.as_double(), b.as_double());
    return apply_order(op, a.as_int(), b.as_int());
  }
  if (a.is_string() && b.is_string()) return apply_order(op, a.as_string(), b.as_string());
  if (seq_comparable(a, b) && (a.as_list().kind == SeqKind::kList || a.as_list().kind == SeqKind::kTuple)) {
    const auto& x = a.as_list().items;
    const auto& y = b.as_list().items;
    for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (!py_equal(x[i], y[i])) return py_order(op, x[i], y[i]);
    }
    return apply_order(op, x.size(), y.size());
  }
  return type_error_order(op, a, b);
}

Result<bool> py_contains(const Value& container, const Value& item) {
  switch (container.kind()) {
    case ValueKind::kUndefined:
      return false;
    case ValueKind::kString:
      if (!item.is_string()) {
        if (item.is_undefined()) return undefined_error(item);
        return errorf("'in <string>' requires string as left operand, not {}", py_type_name(item));
      }
      return container.as_string().find(item.as_string()) != std::string::npos;
    case ValueKind::kList:
      for (const Value& v : container.as_list().items) {
        if (py_equal(v, item)) return true;
      }
      return false;
    case ValueKind::kDict:
      if (item.is_list() || item.is_dict()) return errorf("unhashable type: '{}'", py_type_name(item));
      return item.is_string() && container.as_dict().find(item.as_string()) != nullptr;
    case ValueKind::kIterator: {
      Iterator& it = container.as_iterator();
      while (it.next < it.items.size()) {
        if (py_equal(it.items[it.next++], item)) return true;
      }
      return false;
    }
    default:
      return errorf("argument of type '{}' is not iterable", py_type_name(container));
  }
}

Result<Value> py_binary(BinOp op, const Value& a, const Value& b) {
  if (a.is_undefined()) return undefined_error(a);
  if (b.is_undefined()) return undefined_error(b);
  if (op == BinOp::kAdd) {
    if (a.is_string() || b.is_string()) {
      if (a.is_string() && b.is_string()) return Value::string(a.as_string() + b.as_string());
      if (a.is_string()) return errorf("can only concatenate str (not \"{}\") to str", py_type_name(b));
      return unsupported_operands("+", a, b);
    }
    if (a.is_list() || b.is_list()) {
      if (seq_comparable(a, b) && (a.as_list().kind == SeqKind::kList || a.as_list().kind == SeqKind::kTuple)) {
        std::vector<Value> items = a.as_list().items;
        items.insert(items.end(), b.as_list().items.begin(), b.as_list().items.end());
        return Value::list(std::move(items), a.as_list().kind);
      }
      if (a.is_list_kind(SeqKind::kList)) {
        return errorf("can only concatenate list (not \"{}\") to list", py_type_name(b));
      }
      return unsupported_operands("+", a, b);
    }
  }
  if (op == BinOp::kMul) {
    auto is_seq = [](const Value& v) {
      return v.is_string() || v.is_list_kind(SeqKind::kList) || v.is_list_kind(SeqKind::kTuple);
    };
    if (is_seq(a) && b.is_integral()) return repeat(a, b.as_int());
    if (is_seq(b) && a.is_integral()) return repeat(b, a.as_int());
    if (is_seq(a) || is_seq(b)) {
      return errorf("can't multiply sequence by non-int of type '{}'", py_type_name(is_seq(a) ? b : a));
    }
  }
  if (op == BinOp::kMod && a.is_string()) {
    return errorf("printf-style string formatting ('%' on a string) is not supported; use the format filter");
  }
  return arithmetic(op, a, b);
}

Result<Value> py_negate(const Value& v) {
  if (v.is_undefined()) return undefined_error(v);
  if (v.is_float()) return Value::real(-v.as_double());
  if (v.is_integral()) {
    if (v.as_int() == std::numeric_limits<int64_t>::min()) return checked_int(true, 0);
    return Value::integer(-v.as_int());
  }
  return errorf("bad operand type for unary -: '{}'", py_type_name(v));
}

Result<Value> py_positive(const Value& v) {
  if (v.is_undefined()) return undefined_error(v);
  if (v.is_float()) return v;
  if (v.is_integral()) return Value::integer(v.as_int());
  return errorf("bad operand type for unary +: '{}'", py_type_name(v));
}

Result<int64_t> py_len(const Value& v) {
  switch (v.kind()) {
    case ValueKind::kUndefined:
      return int64_t(0);
    case ValueKind::kString:
      return int64_t(code_point_count(v.as_string()));
    case ValueKind::kList:
      return int64_t(v.as_list().items.size());
    case ValueKind::kDict:
      return int64_t(v.as_dict().entries.size());
    case ValueKind::kLoop:
      return int64_t(v.as_loop().items->size());
    default:
      return errorf("object of type '{}' has no len()", py_type_name(v));
  }
}

Result<std::vector<Value>> py_iterate(const Value& v) {
  switch (v.kind()) {
    case ValueKind::kUndefined:
      return std::vector<Value>{};
    case ValueKind::kList:
      return v.as_list().items;
    case ValueKind::kDict: {
      std::vector<Value> keys;
      keys.reserve(v.as_dict().entries.size());
      for (const auto& e : v.as_dict().entries) keys.push_back(Value::string(e.first));
      return keys;
    }
    case ValueKind::kString: {
      std::vector<Value> chars;
      const std::string& s = v.as_string();
      size_t pos = 0;
      while (pos < s.size()) {
        size_t start = pos;
        next_code_point(s, &pos);
        chars.push_back(Value::string(s.substr(start, pos - start)));
      }
      return chars;
    }
    case ValueKind::kIterator: {
      Iterator& it = v.as_iterator();
      std::vector<Value> rest(it.items.begin() + std::ptrdiff_t(it.next), it.items.end());
      it.next = it.items.size();
      return rest;
    }
    default:
      return errorf("'{}' object is not iterable", py_type_name(v));
  }
}

std::string object_type_repr(const Value& v) {
  if (v.is_none()) return "None";
  if (v.kind() == ValueKind::kNamespace) return "jinja2.utils.Namespace object";
  if (v.kind() == ValueKind::kLoop) return "jinja2.runtime.LoopContext object";
  return fmt::format("{} object", py_type_name(v));
}

namespace {

Value missing_attribute(const Value& obj, const std::string& name) {
  return Value::undefined(fmt::format("'{}' has no attribute '{}'", object_type_repr(obj), name));
}

Value bound_method(const Value& obj, const std::string& name) {
  auto c = std::make_shared<Callable>();
  c->type = Callable::Type::kMethod;
  c->name = name;
  c->receiver = obj;
  return Value::callable(std::move(c));
}

Value unsafe_attribute(const Value& obj, const std::string& name) {
  return Value::undefined(fmt::format("access to attribute '{}' of '{}' object is unsafe.", name, py_type_name(obj)));
}

std::optional<Value> loop_attribute(const LoopState& s, const std::string& name) {
  const int64_t n = int64_t(s.items->size()), i = int64_t(s.index0);
  if (name == "index0") return Value::integer(i);
  if (name == "index") return Value::integer(i + 1);
  if (name == "revindex") return Value::integer(n - i);
  if (name == "revindex0") return Value::integer(n - i - 1);
  if (name == "first") return Value::boolean(i == 0);
  if (name == "last") return Value::boolean(i + 1 == n);
  if (name == "length") return Value::integer(n);
  if (name == "depth") return Value::integer(s.depth0 + 1);
  if (name == "depth0") return Value::integer(s.depth0);
  if (name == "previtem") {
    return i > 0 ? (*s.items)[size_t(i - 1)] : Value::undefined("there is no previous item");
  }
  if (name == "nextitem") {
    return i + 1 < n ? (*s.items)[size_t(i + 1)] : Value::undefined("there is no next item");
  }
  return std::nullopt;
}

// Attribute lookup proper (no item fallback); undefined result when absent.
Value attribute_only(const Value& obj, const std::string& name, bool* found) {
  *found = true;
  if (obj.kind() == ValueKind::kNamespace) {
    if (const Value* v = obj.as_namespace().attrs.find(name)) return *v;
  } else if (obj.kind() == ValueKind::kLoop) {
    if (auto v = loop_attribute(obj.as_loop(), name)) return *v;
  } else if (obj.is_number()) {
    // The data attributes of Python's int and float.
    if (name == "real") return obj.is_float() ? obj : Value::integer(obj.as_int());
    if (name == "imag") return obj.is_float() ? Value::real(0.0) : Value::integer(0);
    if (obj.is_integral() && name == "numerator") return Value::integer(obj.as_int());
    if (obj.is_integral() && name == "denominator") return Value::integer(1);
  }
  switch (method_kind(obj, name)) {
    case MethodKind::kAllowed:
      return bound_method(obj, name);
    case MethodKind::kUnsafe:
      return unsafe_attribute(obj, name);
    case MethodKind::kNone:
      break;
  }
  *found = false;
  return Value();
}

}  // namespace

Result<Value> get_attr(const Value& obj, const std::string& name) {
  if (obj.is_undefined()) return undefined_error(obj);
  bool found = false;
  Value v = attribute_only(obj, name, &found);
  if (found) return v;
  if (obj.is_dict()) {
    if (const Value* item = obj.as_dict().find(name)) return *item;
  }
  return missing_attribute(obj, name);
}

Result<Value> get_item(const Value& obj, const Value& key) {
  if (obj.is_undefined()) return undefined_error(obj);
  if (key.is_undefined()) return undefined_error(key);
  if (obj.is_dict()) {
    if (key.is_string()) {
      if (const Value* item = obj.as_dict().find(key.as_string())) return *item;
    } else if (key.is_list_kind(SeqKind::kList) || key.is_dict()) {
      return errorf("unhashable type: '{}'", py_type_name(key));
    }
  } else if ((obj.is_list_kind(SeqKind::kList) || obj.is_list_kind(SeqKind::kTuple) ||
              obj.is_list_kind(SeqKind::kRange) || obj.is_string()) &&
             key.is_integral()) {
    const int64_t n = obj.is_list() ? int64_t(obj.as_list().items.size()) : 0;
    int64_t i = key.as_int();
    if (obj.is_list()) {
      if (i < 0) i += n;
      if (i >= 0 && i < n) return obj.as_list().items[size_t(i)];
    } else {
      const std::string& s = obj.as_string();
      if (is_ascii(s)) {
        const int64_t len = int64_t(s.size());
        if (i < 0) i += len;
        if (i >= 0 && i < len) return Value::string(std::string(1, s[size_t(i)]));
      } else {
        std::u32string cps = to_code_points(s);
        const int64_t len = int64_t(cps.size());
        if (i < 0) i += len;
        if (i >= 0 && i < len) return Value::string(from_code_points(&cps[size_t(i)], &cps[size_t(i)] + 1));
      }
    }
    return Value::undefined(fmt::format("{} has no element {}", object_type_repr(obj), key.as_int()));
  }
  // Item lookup failed: Jinja retries a string key as an attribute.
  if (key.is_string()) {
    bool found = false;
    Value v = attribute_only(obj, key.as_string(), &found);
    if (found) return v;
    return missing_attribute(obj, key.as_string());
  }
  return Value::undefined(fmt::format("{} has no element {}", object_type_repr(obj), py_repr(key)));
}

Result<Value> get_slice(const Value& obj, const Value* start_v, const Value* stop_v, const Value* step_v) {
  if (obj.is_undefined()) return undefined_error(obj);
  auto as_index = [](const Value* v, const char* what) -> Result<std::optional<int64_t>> {
    if (!v || v->is_none()) return std::optional<int64_t>();
    if (v->is_undefined()) return undefined_error(*v);
    if (!v->is_integral()) {
      return errorf("slice {} must be an integer or None, not {}", what, py_type_name(*v));
    }
    return std::optional<int64_t>(v->as_int());
  };
  M2_ASSIGN_OR_RETURN(auto start, as_index(start_v, "start"));
  M2_ASSIGN_OR_RETURN(auto stop, as_index(stop_v, "stop"));
  M2_ASSIGN_OR_RETURN(auto step_opt, as_index(step_v, "step"));
  const int64_t step = step_opt.value_or(1);
  if (step == 0) return errorf("slice step cannot be zero");

  std::u32string cps;
  const bool is_str = obj.is_string();
  const bool ascii = is_str && is_ascii(obj.as_string());
  int64_t len = 0;
  if (is_str) {
    if (!ascii) cps = to_code_points(obj.as_string());
    len = ascii ? int64_t(obj.as_string().size()) : int64_t(cps.size());
  } else if (obj.is_list()) {
    len = int64_t(obj.as_list().items.size());
  } else {
    return errorf("'{}' object is not subscriptable", py_type_name(obj));
  }
  // slice.indices(len), as CPython computes it.
  const int64_t lower = step < 0 ? -1 : 0, upper = step < 0 ? len - 1 : len;
  const int64_t b = start ? clamp_index(*start, len, lower, upper) : (step < 0 ? upper : lower);
  const int64_t e = stop ? clamp_index(*stop, len, lower, upper) : (step < 0 ? lower : upper);
  std::vector<int64_t> picks;
  for (int64_t i = b; step > 0 ? i < e : i > e; i += step) picks.push_back(i);

  if (is_str) {
    std::string out;
    for (int64_t i : picks) {
      if (ascii)
        out.push_back(obj.as_string()[size_t(i)]);
      else
        append_utf8(&out, cps[size_t(i)]);
    }
    return Value::string(std::move(out));
  }
  const List& l = obj.as_list();
  std::vector<Value> items;
  items.reserve(picks.size());
  for (int64_t i : picks) items.push_back(l.items[size_t(i)]);
  // Slicing a dict view is a TypeError in Python; a range slice is a range.
  if (l.kind != SeqKind::kList && l.kind != SeqKind::kTuple && l.kind != SeqKind::kRange) {
    return errorf("'{}' object is not subscriptable", py_type_name(obj));
  }
  return Value::list(std::move(items), l.kind == SeqKind::kRange ? SeqKind::kList : l.kind);
}

}  // namespace m2::text::jinja
