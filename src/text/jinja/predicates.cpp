// Jinja's built-in tests (`x is string`, `x is divisibleby 3`, ...), from
// jinja2/tests.py, with Python's type rules: bool is a number and an int
// subclass but not an `integer` test match; Undefined is iterable and a
// sequence (it has __iter__, __len__ and __getitem__).
#include <string_view>

#include "text/jinja/builtin_util.h"
#include "text/jinja/builtins.h"
#include "text/jinja/ops.h"
#include "text/jinja/py_format.h"
#include "text/jinja/unicode.h"

namespace m2::text::jinja {
namespace {

Status no_args(std::string_view name, const CallArgs& a) {
  Params p;
  return bind_args(name, a, {}, &p);
}

Result<const Value*> one_arg(std::string_view name, const CallArgs& a) {
  Params p;
  M2_RETURN_IF_ERROR(bind_args(name, a, {"other"}, &p));
  if (!p[0]) return errorf("test '{}' needs an argument", name);
  return p[0];
}

#define M2_SIMPLE_TEST(fn, name, expr)                 \
  Result<bool> fn(const Value& v, const CallArgs& a) { \
    M2_RETURN_IF_ERROR(no_args(name, a));              \
    return (expr);                                     \
  }

M2_SIMPLE_TEST(t_defined, "defined", !v.is_undefined())
M2_SIMPLE_TEST(t_undefined, "undefined", v.is_undefined())
M2_SIMPLE_TEST(t_none, "none", v.is_none())
M2_SIMPLE_TEST(t_boolean, "boolean", v.is_bool())
M2_SIMPLE_TEST(t_false, "false", v.is_bool() && !v.as_bool())
M2_SIMPLE_TEST(t_true, "true", v.is_bool() && v.as_bool())
M2_SIMPLE_TEST(t_integer, "integer", v.is_int())
M2_SIMPLE_TEST(t_float, "float", v.is_float())
M2_SIMPLE_TEST(t_number, "number", v.is_number())
M2_SIMPLE_TEST(t_string, "string", v.is_string())
M2_SIMPLE_TEST(t_mapping, "mapping", v.is_dict())
M2_SIMPLE_TEST(t_callable, "callable", v.kind() == ValueKind::kCallable || v.is_undefined())
M2_SIMPLE_TEST(t_iterable, "iterable",
               v.is_undefined() || v.is_string() || v.is_list() || v.is_dict() || v.kind() == ValueKind::kIterator ||
                   v.kind() == ValueKind::kLoop)
M2_SIMPLE_TEST(t_sequence, "sequence",
               v.is_undefined() || v.is_string() || v.is_dict() || v.is_list_kind(SeqKind::kList) ||
                   v.is_list_kind(SeqKind::kTuple) || v.is_list_kind(SeqKind::kRange))
M2_SIMPLE_TEST(t_escaped, "escaped", false)

#undef M2_SIMPLE_TEST

Result<bool> parity(const Value& v, const CallArgs& a, const char* name, int64_t want) {
  M2_RETURN_IF_ERROR(no_args(name, a));
  M2_ASSIGN_OR_RETURN(Value m, py_binary(ast::BinOp::kMod, v, Value::integer(2)));
  return py_equal(m, Value::integer(want));
}

Result<bool> t_odd(const Value& v, const CallArgs& a) { return parity(v, a, "odd", 1); }
Result<bool> t_even(const Value& v, const CallArgs& a) { return parity(v, a, "even", 0); }

Result<bool> t_divisibleby(const Value& v, const CallArgs& a) {
  M2_ASSIGN_OR_RETURN(const Value* num, one_arg("divisibleby", a));
  M2_ASSIGN_OR_RETURN(Value m, py_binary(ast::BinOp::kMod, v, *num));
  return py_equal(m, Value::integer(0));
}

// str(value).islower() / .isupper(): at least one cased character and none
// of the other case.
Result<bool> case_test(const Value& v, const CallArgs& a, const char* name, char want) {
  M2_RETURN_IF_ERROR(no_args(name, a));
  const std::string s = py_str(v);
  bool any = false;
  size_t pos = 0;
  while (pos < s.size()) {
    char c = case_class(next_code_point(s, &pos));
    if (c == 0) continue;
    if (c != want) return false;
    any = true;
  }
  return any;
}

Result<bool> t_lower(const Value& v, const CallArgs& a) { return case_test(v, a, "lower", 'l'); }
Result<bool> t_upper(const Value& v, const CallArgs& a) { return case_test(v, a, "upper", 'u'); }

Result<bool> t_sameas(const Value& v, const CallArgs& a) {
  M2_ASSIGN_OR_RETURN(const Value* other, one_arg("sameas", a));
  if (v.kind() != other->kind()) return false;
  switch (v.kind()) {
    // Python's None/True/False are singletons; small ints are cached too,
    // but `is` on numbers is not something templates rely on.
    case ValueKind::kNone:
      return true;
    case ValueKind::kBool:
      return v.as_bool() == other->as_bool();
    case ValueKind::kUndefined:
      return false;
    case ValueKind::kInt:
      return v.as_int() == other->as_int();
    case ValueKind::kFloat:
      return false;
    default:
      return v.identity() == other->identity();
  }
}

Result<bool> t_in(const Value& v, const CallArgs& a) {
  M2_ASSIGN_OR_RETURN(const Value* seq, one_arg("in", a));
  return py_contains(*seq, v);
}

Result<bool> t_eq(const Value& v, const CallArgs& a) {
  M2_ASSIGN_OR_RETURN(const Value* other, one_arg("eq", a));
  return py_equal(v, *other);
}

Result<bool> t_ne(const Value& v, const CallArgs& a) {
  M2_ASSIGN_OR_RETURN(const Value* other, one_arg("ne", a));
  return !py_equal(v, *other);
}

template <ast::CmpOp op>
Result<bool> t_order(const Value& v, const CallArgs& a) {
  M2_ASSIGN_OR_RETURN(const Value* other, one_arg("comparison", a));
  return py_order(op, v, *other);
}

struct TestEntry {
  const char* name;
  ast::TestFn fn;
};

constexpr TestEntry kTests[] = {
    {"odd", t_odd},
    {"even", t_even},
    {"divisibleby", t_divisibleby},
    {"defined", t_defined},
    {"undefined", t_undefined},
    {"none", t_none},
    {"boolean", t_boolean},
    {"false", t_false},
    {"true", t_true},
    {"integer", t_integer},
    {"float", t_float},
    {"lower", t_lower},
    {"upper", t_upper},
    {"string", t_string},
    {"mapping", t_mapping},
    {"number", t_number},
    {"sequence", t_sequence},
    {"iterable", t_iterable},
    {"callable", t_callable},
    {"sameas", t_sameas},
    {"escaped", t_escaped},
    {"in", t_in},
    {"==", t_eq},
    {"eq", t_eq},
    {"equalto", t_eq},
    {"!=", t_ne},
    {"ne", t_ne},
    {">", t_order<ast::CmpOp::kGt>},
    {"gt", t_order<ast::CmpOp::kGt>},
    {"greaterthan", t_order<ast::CmpOp::kGt>},
    {">=", t_order<ast::CmpOp::kGe>},
    {"ge", t_order<ast::CmpOp::kGe>},
    {"<", t_order<ast::CmpOp::kLt>},
    {"lt", t_order<ast::CmpOp::kLt>},
    {"lessthan", t_order<ast::CmpOp::kLt>},
    {"<=", t_order<ast::CmpOp::kLe>},
    {"le", t_order<ast::CmpOp::kLe>},
};

}  // namespace

ast::TestFn find_test(std::string_view name) {
  for (const auto& t : kTests) {
    if (name == t.name) return t.fn;
  }
  return nullptr;
}

}  // namespace m2::text::jinja
