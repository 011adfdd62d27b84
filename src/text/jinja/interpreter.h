// Tree-walking evaluator of a parsed Program. One Interpreter renders one
// template once; it holds only per-render state (macro call depth, the
// evaluation budget), so concurrent renders of the same Program each use
// their own Interpreter.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_set>
#include <vector>

#include "text/jinja/ast.h"
#include "text/jinja/builtins.h"
#include "text/jinja/callable.h"
#include "text/jinja/value.h"
#include "util/status.h"

namespace m2::text::jinja {

// Bounds that keep a hostile or buggy template from exhausting the stack or
// running for hours: macro recursion depth, and loop iterations plus macro
// calls per render.
inline constexpr int kMaxMacroDepth = 200;
inline constexpr int64_t kMaxEvaluationSteps = 20'000'000;

class Interpreter {
 public:
  // `globals[slot]` is the global function bound to a name, or undefined.
  Interpreter(const Program& program, const std::vector<Value>& globals) : program_(program), globals_(globals) {}
  // Breaks the reference cycles a render can create (a frame holding a
  // macro that holds the frame; a namespace stored in itself).
  ~Interpreter();
  Interpreter(const Interpreter&) = delete;
  Interpreter& operator=(const Interpreter&) = delete;

  // Runs the template body with `root` as the outermost scope.
  Status render(const std::shared_ptr<Frame>& root, std::string* out);

 private:
  enum class Flow { kNormal, kBreak, kContinue };
  using FramePtr = std::shared_ptr<Frame>;

  Result<Flow> exec_body(const ast::Body& body, const FramePtr& frame, std::string* out);
  Result<Flow> exec(const ast::Stmt& stmt, const FramePtr& frame, std::string* out);
  Result<Flow> exec_for(const ast::For& node, const FramePtr& frame, std::string* out);
  Status exec_set_namespace(const ast::Target& target, Value value, Frame& frame);
  Status assign(const ast::Target& target, Value value, Frame& frame);
  Result<std::string> render_block(const ast::Body& body, const FramePtr& parent);

  Result<Value> eval(const ast::Expr& e, Frame& frame);
  Result<Value> eval_call(const ast::Call& node, Frame& frame);
  Result<Value> eval_compare(const ast::Compare& node, Frame& frame);
  Result<CallArgs> eval_args(const ast::Args& args, Frame& frame);
  Result<Value> apply_filter(const ast::Filter& node, Value operand, Frame& frame);
  Result<Value> apply_filter_chain(const ast::Expr* filter, Value input, Frame& frame);
  Result<Value> call_value(const Value& callee, CallArgs args, const ast::Expr& at);
  Result<Value> call_macro(const Callable& macro, CallArgs args, const ast::Expr& at);
  Value lookup(int slot, Frame& frame) const;
  Status step(int line, int column);

  const Program& program_;
  const std::vector<Value>& globals_;
  std::vector<FramePtr> closures_;  // frames captured by macros
  std::vector<Value> namespaces_;   // namespaces assigned to
  std::unordered_set<const void*> namespace_ids_;
  int macro_depth_ = 0;
  int64_t steps_ = 0;
};

}  // namespace m2::text::jinja
