// Jinja's built-in filters, tests and global functions, and the Python
// methods of str/dict/list (plus loop.cycle/changed) that templates call.
// Names are resolved at parse time: an unknown filter or test is a template
// error at its line, as in Jinja.
#pragma once

#include <array>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "text/jinja/ast.h"
#include "text/jinja/value.h"
#include "util/status.h"

namespace m2::text::jinja {

struct CallArgs {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keywords;
};

// Parameters bound by bind_args, in declaration order; null when unset.
// Fixed capacity: no built-in takes more than kMaxParams parameters, and
// binding happens on every filter call, so it must not allocate.
inline constexpr size_t kMaxParams = 6;
using Params = std::array<const Value*, kMaxParams>;

// Binds call arguments to Python-style parameters (positional in order,
// then by keyword). Errors name the function: "replace() got an unexpected
// keyword argument 'x'".
Status bind_args(std::string_view function, const CallArgs& args, std::initializer_list<const char*> params,
                 Params* bound);

ast::FilterFn find_filter(std::string_view name);
ast::TestFn find_test(std::string_view name);

// Global functions (range, dict, namespace, raise_exception, strftime_now).
using GlobalFn = Result<Value> (*)(const CallArgs& args);
GlobalFn find_global(std::string_view name);

// Python methods on values. `method_kind` says whether `name` is a method of
// the receiver's type that the sandbox allows, one it forbids because it
// mutates (list.append, dict.update: a SecurityError when called), or none.
enum class MethodKind { kNone, kAllowed, kUnsafe };
MethodKind method_kind(const Value& receiver, std::string_view name);
Result<Value> call_method(const Value& receiver, std::string_view name, const CallArgs& args);

}  // namespace m2::text::jinja
