#include "text/jinja/value.h"

#include <limits>

#include "text/jinja/callable.h"

namespace m2::text::jinja {

const Value* Dict::find(std::string_view key) const {
  for (const auto& [k, v] : entries) {
    if (k == key) return &v;
  }
  return nullptr;
}

void Dict::set(std::string key, Value value) {
  for (auto& [k, v] : entries) {
    if (k == key) {
      v = std::move(value);
      return;
    }
  }
  entries.emplace_back(std::move(key), std::move(value));
}

Value Value::undefined(std::string message) {
  Value v;
  v.p_ = std::make_shared<const std::string>(std::move(message));
  return v;
}

Value Value::none() {
  Value v;
  v.kind_ = ValueKind::kNone;
  return v;
}

Value Value::boolean(bool b) {
  Value v;
  v.kind_ = ValueKind::kBool;
  v.b_ = b;
  return v;
}

Value Value::integer(int64_t i) {
  Value v;
  v.kind_ = ValueKind::kInt;
  v.i_ = i;
  return v;
}

Value Value::real(double f) {
  Value v;
  v.kind_ = ValueKind::kFloat;
  v.f_ = f;
  return v;
}

Value Value::string(std::string s) {
  Value v;
  v.kind_ = ValueKind::kString;
  v.p_ = std::make_shared<const std::string>(std::move(s));
  return v;
}

Value Value::list(std::vector<Value> items, SeqKind kind) {
  List l;
  l.items = std::move(items);
  l.kind = kind;
  return list(std::move(l));
}

Value Value::list(List l) {
  Value v;
  v.kind_ = ValueKind::kList;
  v.p_ = std::make_shared<const List>(std::move(l));
  return v;
}

Value Value::dict(Dict d) {
  Value v;
  v.kind_ = ValueKind::kDict;
  v.p_ = std::make_shared<const Dict>(std::move(d));
  return v;
}

Value Value::namespace_object(Dict attrs) {
  Value v;
  v.kind_ = ValueKind::kNamespace;
  v.p_ = std::make_shared<Namespace>(Namespace{std::move(attrs)});
  return v;
}

Value Value::iterator(std::vector<Value> items, const char* type_name) {
  Value v;
  v.kind_ = ValueKind::kIterator;
  auto it = std::make_shared<Iterator>();
  it->items = std::move(items);
  it->type_name = type_name;
  v.p_ = std::move(it);
  return v;
}

Value Value::callable(std::shared_ptr<const Callable> c) {
  Value v;
  v.kind_ = ValueKind::kCallable;
  v.p_ = std::move(c);
  return v;
}

Value Value::loop(std::shared_ptr<LoopState> state) {
  Value v;
  v.kind_ = ValueKind::kLoop;
  v.p_ = std::move(state);
  return v;
}

const std::string& Value::undefined_message() const {
  static const std::string kDefault = "undefined value";
  return p_ ? *static_cast<const std::string*>(p_.get()) : kDefault;
}

bool Value::truthy() const {
  switch (kind_) {
    case ValueKind::kUndefined:
    case ValueKind::kNone:
      return false;
    case ValueKind::kBool:
      return b_;
    case ValueKind::kInt:
      return i_ != 0;
    case ValueKind::kFloat:
      return f_ != 0.0;
    case ValueKind::kString:
      return !as_string().empty();
    case ValueKind::kList:
      return !as_list().items.empty();
    case ValueKind::kDict:
      return !as_dict().entries.empty();
    default:
      return true;
  }
}

const char* py_type_name(const Value& v) {
  switch (v.kind()) {
    case ValueKind::kUndefined:
      return "Undefined";
    case ValueKind::kNone:
      return "NoneType";
    case ValueKind::kBool:
      return "bool";
    case ValueKind::kInt:
      return "int";
    case ValueKind::kFloat:
      return "float";
    case ValueKind::kString:
      return "str";
    case ValueKind::kList:
      switch (v.as_list().kind) {
        case SeqKind::kList:
          return "list";
        case SeqKind::kTuple:
          return "tuple";
        case SeqKind::kDictItems:
          return "dict_items";
        case SeqKind::kDictKeys:
          return "dict_keys";
        case SeqKind::kDictValues:
          return "dict_values";
        case SeqKind::kRange:
          return "range";
      }
      return "list";
    case ValueKind::kDict:
      return "dict";
    case ValueKind::kNamespace:
      return "Namespace";
    case ValueKind::kIterator:
      return v.as_iterator().type_name;
    case ValueKind::kCallable:
      return v.as_callable().type == Callable::Type::kMacro ? "Macro" : "builtin_function_or_method";
    case ValueKind::kLoop:
      return "LoopContext";
  }
  return "object";
}

namespace {

Result<Value> from_json(const OrderedJson& j, std::string_view what, int depth) {
  if (depth > kMaxNesting) return errorf("{}: JSON nested deeper than {} levels", what, kMaxNesting);
  switch (j.type()) {
    case OrderedJson::value_t::null:
      return Value::none();
    case OrderedJson::value_t::boolean:
      return Value::boolean(j.get<bool>());
    case OrderedJson::value_t::number_integer:
      return Value::integer(j.get<int64_t>());
    case OrderedJson::value_t::number_unsigned: {
      uint64_t u = j.get<uint64_t>();
      if (u <= uint64_t(std::numeric_limits<int64_t>::max())) return Value::integer(int64_t(u));
      return Value::real(double(u));
    }
    case OrderedJson::value_t::number_float:
      return Value::real(j.get<double>());
    case OrderedJson::value_t::string:
      return Value::string(j.get<std::string>());
    case OrderedJson::value_t::array: {
      std::vector<Value> items;
      items.reserve(j.size());
      for (const auto& e : j) {
        M2_ASSIGN_OR_RETURN(Value v, from_json(e, what, depth + 1));
        items.push_back(std::move(v));
      }
      return Value::list(std::move(items));
    }
    case OrderedJson::value_t::object: {
      Dict d;
      d.entries.reserve(j.size());
      for (const auto& [k, e] : j.items()) {
        M2_ASSIGN_OR_RETURN(Value v, from_json(e, what, depth + 1));
        d.entries.emplace_back(k, std::move(v));
      }
      return Value::dict(std::move(d));
    }
    default:
      return errorf("{}: unsupported JSON value", what);
  }
}

}  // namespace

Result<Value> value_from_json(const OrderedJson& j, std::string_view what) { return from_json(j, what, 0); }

}  // namespace m2::text::jinja
