// Python object semantics the evaluator needs: equality and ordering,
// `in`, arithmetic, len(), iteration, and Jinja's sandboxed attribute/item
// lookup (`a.b` tries the attribute then the item, `a['b']` the reverse;
// misses give an Undefined that fails only when used further).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "text/jinja/ast.h"
#include "text/jinja/value.h"
#include "util/status.h"

namespace m2::text::jinja {

// The error an Undefined raises when used ("'x' is undefined").
Status undefined_error(const Value& v);

// Python ==.
bool py_equal(const Value& a, const Value& b);
// Python <, <=, >, >= (TypeError between unorderable types).
Result<bool> py_order(ast::CmpOp op, const Value& a, const Value& b);
// Python `item in container`.
Result<bool> py_contains(const Value& container, const Value& item);
Result<Value> py_binary(ast::BinOp op, const Value& a, const Value& b);
Result<Value> py_negate(const Value& v);
Result<Value> py_positive(const Value& v);
// Python len(); Undefined has length 0 as in Jinja.
Result<int64_t> py_len(const Value& v);
// The items a Python for loop would see: list items, dict keys, string
// characters, what is left of an iterator (consuming it); Undefined is empty.
Result<std::vector<Value>> py_iterate(const Value& v);

// Jinja's "object_type_repr" used in undefined messages: "dict object".
std::string object_type_repr(const Value& v);

// Sandboxed getattr / getitem as jinja2.sandbox does them.
Result<Value> get_attr(const Value& obj, const std::string& name);
Result<Value> get_item(const Value& obj, const Value& key);
// obj[start:stop:step]; null pointers stand for omitted parts.
Result<Value> get_slice(const Value& obj, const Value* start, const Value* stop, const Value* step);

}  // namespace m2::text::jinja
