// The value type of the Jinja interpreter: the Python objects a chat template
// can see (None, bool, int, float, str, list, tuple, dict, Jinja's Undefined
// and Namespace, loop objects, macros, iterators), with Python's semantics
// where output depends on them.
//
// Strings, lists and dicts are immutable and shared (a Value is 32 bytes and
// copying one is a reference-count increment); this matches the
// ImmutableSandboxedEnvironment that Hugging Face renders chat templates in,
// where list.append and dict.update are forbidden. Namespaces, loop states and
// iterators are the only mutable objects, as in Jinja. Dicts keep insertion
// order (Python 3.7+ semantics, needed for `tojson` and `items()` output).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "util/json.h"
#include "util/status.h"

namespace m2::text::jinja {

class Value;

enum class ValueKind : uint8_t {
  kUndefined,
  kNone,
  kBool,
  kInt,
  kFloat,
  kString,
  kList,  // list, tuple, dict views, range: see SeqKind
  kDict,
  kNamespace,  // jinja2 namespace(): mutable attributes, shared by reference
  kIterator,   // single-use iterator (Python generators from map/select/...)
  kCallable,   // macro, global function or bound method
  kLoop,       // the `loop` variable of a for loop
};

// What Python type a kList value stands for; it decides printing, equality
// and what JSON accepts.
enum class SeqKind : uint8_t { kList, kTuple, kDictItems, kDictKeys, kDictValues, kRange };

struct List {
  std::vector<Value> items;
  SeqKind kind = SeqKind::kList;
  int64_t range_start = 0, range_stop = 0, range_step = 1;  // kRange only, for printing
};

struct Dict {
  std::vector<std::pair<std::string, Value>> entries;  // insertion order

  const Value* find(std::string_view key) const;
  // Replaces the value of an existing key in place, else appends.
  void set(std::string key, Value value);
};

struct Namespace {
  Dict attrs;
};

// A Python iterator (generator, list_reverseiterator): iterating consumes it.
struct Iterator {
  std::vector<Value> items;
  size_t next = 0;
  const char* type_name = "generator";
};

// State of one for loop, shared by every `loop` value of that loop.
struct LoopState {
  // The iterated items; shared with the list being iterated when there is
  // one, so a loop does not copy its list.
  std::shared_ptr<const std::vector<Value>> items;
  size_t index0 = 0;
  int depth0 = 0;
  std::vector<Value> last_changed;  // argument of the previous loop.changed()
  bool changed_called = false;
};

struct Callable;  // defined in interpreter.h (macros need the AST)

class Value {
 public:
  Value() : kind_(ValueKind::kUndefined), i_(0) {}

  static Value undefined(std::string message);
  static Value none();
  static Value boolean(bool b);
  static Value integer(int64_t i);
  static Value real(double f);
  static Value string(std::string s);
  static Value list(std::vector<Value> items, SeqKind kind = SeqKind::kList);
  static Value list(List l);
  static Value dict(Dict d);
  static Value namespace_object(Dict attrs);
  static Value iterator(std::vector<Value> items, const char* type_name);
  static Value callable(std::shared_ptr<const Callable> c);
  static Value loop(std::shared_ptr<LoopState> state);

  ValueKind kind() const { return kind_; }
  bool is_undefined() const { return kind_ == ValueKind::kUndefined; }
  bool is_none() const { return kind_ == ValueKind::kNone; }
  bool is_bool() const { return kind_ == ValueKind::kBool; }
  bool is_int() const { return kind_ == ValueKind::kInt; }
  bool is_float() const { return kind_ == ValueKind::kFloat; }
  bool is_string() const { return kind_ == ValueKind::kString; }
  bool is_list() const { return kind_ == ValueKind::kList; }
  bool is_dict() const { return kind_ == ValueKind::kDict; }
  // Python's numbers.Number (bool is an int in Python).
  bool is_number() const { return kind_ == ValueKind::kBool || kind_ == ValueKind::kInt || kind_ == ValueKind::kFloat; }
  // bool or int: usable where Python takes an int.
  bool is_integral() const { return kind_ == ValueKind::kBool || kind_ == ValueKind::kInt; }
  bool is_list_kind(SeqKind k) const { return is_list() && as_list().kind == k; }

  bool as_bool() const { return b_; }
  int64_t as_int() const { return kind_ == ValueKind::kBool ? int64_t(b_) : i_; }
  // Any number as a double.
  double as_double() const { return kind_ == ValueKind::kFloat ? f_ : double(as_int()); }
  const std::string& as_string() const { return *static_cast<const std::string*>(p_.get()); }
  const List& as_list() const { return *static_cast<const List*>(p_.get()); }
  const Dict& as_dict() const { return *static_cast<const Dict*>(p_.get()); }
  Namespace& as_namespace() const { return *static_cast<Namespace*>(const_cast<void*>(p_.get())); }
  Iterator& as_iterator() const { return *static_cast<Iterator*>(const_cast<void*>(p_.get())); }
  LoopState& as_loop() const { return *static_cast<LoopState*>(const_cast<void*>(p_.get())); }
  const Callable& as_callable() const { return *static_cast<const Callable*>(p_.get()); }
  // A list's items, sharing ownership with the list (kList values only).
  std::shared_ptr<const std::vector<Value>> shared_items() const {
    return std::shared_ptr<const std::vector<Value>>(p_, &as_list().items);
  }
  // For an undefined value: the error raised when it is used (e.g. "'x' is undefined").
  const std::string& undefined_message() const;
  // Identity of shared objects (Python `is`, `sameas`).
  const void* identity() const { return p_.get(); }

  // Python truthiness (Undefined is falsy; iterators, namespaces and
  // callables are always true).
  bool truthy() const;

 private:
  ValueKind kind_;
  union {
    bool b_;
    int64_t i_;
    double f_;
  };
  std::shared_ptr<const void> p_;
};

// Python type name of a value, for error messages ("str", "NoneType", ...).
const char* py_type_name(const Value& v);

// Nesting depth beyond which recursive operations (JSON conversion, repr,
// tojson, equality) refuse or cut off, so hostile input cannot overflow the
// stack. Python's own recursion limit is 1000.
inline constexpr int kMaxNesting = 512;

// Converts parsed JSON (with document key order) to template values, as
// Python's json.loads does: integers stay integers, JSON numbers with a
// fraction or exponent become floats. Integers beyond the int64 range become
// floats (Python would keep them exact). `what` names the input in errors.
Result<Value> value_from_json(const OrderedJson& j, std::string_view what);

}  // namespace m2::text::jinja
