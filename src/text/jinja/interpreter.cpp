#include "text/jinja/interpreter.h"

#include <fmt/format.h>

#include "text/jinja/lexer.h"
#include "text/jinja/ops.h"
#include "text/jinja/py_format.h"

namespace m2::text::jinja {

using namespace ast;

namespace {

// Errors from operations on values carry no position; the node that ran the
// operation adds it. Errors of nested nodes already have theirs.
Status located(const Expr& at, const Status& s) {
  if (s.ok()) return s;
  return error_at(at.line, at.column, s.message());
}

template <typename T>
Result<T> located(const Expr& at, Result<T> r) {
  if (r.ok()) return r;
  return error_at(at.line, at.column, r.status().message());
}

// A located failure for a statement node.
Status fail(const Stmt& at, std::string_view message) { return error_at(at.line, at.column, message); }

}  // namespace

Interpreter::~Interpreter() {
  for (const auto& f : closures_) f->clear();
  for (const auto& ns : namespaces_) ns.as_namespace().attrs.entries.clear();
}

Status Interpreter::render(const std::shared_ptr<Frame>& root, std::string* out) {
  auto flow = exec_body(program_.body, root, out);
  return flow.ok() ? Status() : flow.status();
}

Status Interpreter::step(int line, int column) {
  if (++steps_ > kMaxEvaluationSteps) {
    return error_at(
        line, column,
        fmt::format("template exceeded {} loop iterations and macro calls; refusing to continue", kMaxEvaluationSteps));
  }
  return {};
}

Value Interpreter::lookup(int slot, Frame& frame) const {
  for (Frame* f = &frame; f; f = f->parent.get()) {
    if (Value* v = f->find_local(slot)) return *v;
  }
  const Value& g = globals_[size_t(slot)];
  if (!g.is_undefined()) return g;
  return Value::undefined(fmt::format("'{}' is undefined", program_.symbols[size_t(slot)]));
}

// ---- statements ---------------------------------------------------------------

Result<Interpreter::Flow> Interpreter::exec_body(const Body& body, const FramePtr& frame, std::string* out) {
  for (const auto& stmt : body) {
    M2_ASSIGN_OR_RETURN(Flow flow, exec(*stmt, frame, out));
    if (flow != Flow::kNormal) return flow;
  }
  return Flow::kNormal;
}

Result<std::string> Interpreter::render_block(const Body& body, const FramePtr& parent) {
  auto frame = std::make_shared<Frame>();
  frame->parent = parent;
  std::string buf;
  M2_ASSIGN_OR_RETURN(Flow flow, exec_body(body, frame, &buf));
  (void)flow;  // loop controls cannot cross a block body (the parser checks)
  return buf;
}

Result<Interpreter::Flow> Interpreter::exec(const Stmt& stmt, const FramePtr& frame, std::string* out) {
  switch (stmt.kind) {
    case StmtKind::kOutput:
      for (const auto& part : static_cast<const Output&>(stmt).parts) {
        if (!part.expr) {
          *out += part.text;
          continue;
        }
        M2_ASSIGN_OR_RETURN(Value v, eval(*part.expr, *frame));
        append_py_str(v, out);
      }
      return Flow::kNormal;
    case StmtKind::kIf: {
      const auto& node = static_cast<const If&>(stmt);
      for (const auto& [test, body] : node.branches) {
        M2_ASSIGN_OR_RETURN(Value v, eval(*test, *frame));
        if (v.truthy()) return exec_body(body, frame, out);
      }
      return exec_body(node.else_body, frame, out);
    }
    case StmtKind::kFor:
      return exec_for(static_cast<const For&>(stmt), frame, out);
    case StmtKind::kSet: {
      const auto& node = static_cast<const Set&>(stmt);
      M2_ASSIGN_OR_RETURN(Value v, eval(*node.value, *frame));
      M2_RETURN_IF_ERROR(assign(node.target, std::move(v), *frame));
      return Flow::kNormal;
    }
    case StmtKind::kSetBlock: {
      const auto& node = static_cast<const SetBlock&>(stmt);
      M2_ASSIGN_OR_RETURN(std::string text, render_block(node.body, frame));
      Value v = Value::string(std::move(text));
      if (node.filter) {
        auto block_frame = std::make_shared<Frame>();
        block_frame->parent = frame;
        M2_ASSIGN_OR_RETURN(v, apply_filter_chain(node.filter.get(), std::move(v), *block_frame));
      }
      M2_RETURN_IF_ERROR(assign(node.target, std::move(v), *frame));
      return Flow::kNormal;
    }
    case StmtKind::kMacro: {
      const auto& node = static_cast<const Macro&>(stmt);
      auto c = std::make_shared<Callable>();
      c->type = Callable::Type::kMacro;
      c->name = node.name;
      c->macro = &node;
      c->closure = frame;
      if (closures_.empty() || closures_.back() != frame) closures_.push_back(frame);
      frame->set(node.slot, Value::callable(std::move(c)));
      return Flow::kNormal;
    }
    case StmtKind::kFilterBlock: {
      const auto& node = static_cast<const FilterBlock&>(stmt);
      M2_ASSIGN_OR_RETURN(std::string text, render_block(node.body, frame));
      auto block_frame = std::make_shared<Frame>();
      block_frame->parent = frame;
      M2_ASSIGN_OR_RETURN(Value v, apply_filter_chain(node.filter.get(), Value::string(std::move(text)), *block_frame));
      append_py_str(v, out);
      return Flow::kNormal;
    }
    case StmtKind::kWith: {
      const auto& node = static_cast<const With&>(stmt);
      auto inner = std::make_shared<Frame>();
      inner->parent = frame;
      for (size_t i = 0; i < node.targets.size(); ++i) {
        M2_ASSIGN_OR_RETURN(Value v, eval(*node.values[i], *frame));
        M2_RETURN_IF_ERROR(assign(node.targets[i], std::move(v), *inner));
      }
      M2_ASSIGN_OR_RETURN(Flow flow, exec_body(node.body, inner, out));
      return flow;
    }
    case StmtKind::kBreak:
      return Flow::kBreak;
    case StmtKind::kContinue:
      return Flow::kContinue;
    case StmtKind::kScope: {
      M2_ASSIGN_OR_RETURN(std::string text, render_block(static_cast<const Scope&>(stmt).body, frame));
      *out += text;
      return Flow::kNormal;
    }
  }
  return fail(stmt, "unknown statement");
}

Result<Interpreter::Flow> Interpreter::exec_for(const For& node, const FramePtr& frame, std::string* out) {
  M2_ASSIGN_OR_RETURN(Value iterable, eval(*node.iter, *frame));
  std::shared_ptr<const std::vector<Value>> items;
  if (iterable.is_list() && !node.filter) {
    items = iterable.shared_items();  // no copy of the list
  } else {
    M2_ASSIGN_OR_RETURN(std::vector<Value> all, located(*node.iter, py_iterate(iterable)));
    if (node.filter) {
      // `for x in xs if cond`: the condition sees the target, and loop.index
      // and loop.length then count only the accepted items.
      std::vector<Value> kept;
      for (Value& item : all) {
        auto test_frame = std::make_shared<Frame>();
        test_frame->parent = frame;
        M2_RETURN_IF_ERROR(assign(node.target, item, *test_frame));
        M2_ASSIGN_OR_RETURN(Value ok, eval(*node.filter, *test_frame));
        if (ok.truthy()) kept.push_back(std::move(item));
      }
      all = std::move(kept);
    }
    items = std::make_shared<const std::vector<Value>>(std::move(all));
  }
  if (items->empty()) {
    if (node.else_body.empty()) return Flow::kNormal;
    auto else_frame = std::make_shared<Frame>();
    else_frame->parent = frame;
    M2_ASSIGN_OR_RETURN(Flow flow, exec_body(node.else_body, else_frame, out));
    (void)flow;
    return Flow::kNormal;
  }
  auto state = std::make_shared<LoopState>();
  state->items = items;
  const Value loop = Value::loop(state);
  for (size_t i = 0; i < items->size(); ++i) {
    M2_RETURN_IF_ERROR(step(node.line, node.column));
    state->index0 = i;
    // Each iteration is a fresh scope: assignments do not survive it.
    auto iteration = std::make_shared<Frame>();
    iteration->parent = frame;
    if (program_.loop_slot >= 0) iteration->set(program_.loop_slot, loop);
    M2_RETURN_IF_ERROR(assign(node.target, (*items)[i], *iteration));
    M2_ASSIGN_OR_RETURN(Flow flow, exec_body(node.body, iteration, out));
    if (flow == Flow::kBreak) break;
  }
  return Flow::kNormal;
}

Status Interpreter::exec_set_namespace(const Target& target, Value value, Frame& frame) {
  Value ns = lookup(target.slot, frame);
  if (ns.kind() != ValueKind::kNamespace) {
    return error_at(target.line, target.column, "cannot assign attribute on non-namespace object");
  }
  if (target.attr.starts_with("_")) {
    return error_at(target.line, target.column,
                    fmt::format("Chat templates cannot store underscore-prefixed attributes on a namespace, but got "
                                "'{}'. Please rename the attribute.",
                                target.attr));
  }
  if (namespace_ids_.insert(ns.identity()).second) namespaces_.push_back(ns);
  ns.as_namespace().attrs.set(target.attr, std::move(value));
  return {};
}

Status Interpreter::assign(const Target& target, Value value, Frame& frame) {
  switch (target.kind) {
    case Target::Kind::kName:
      frame.set(target.slot, std::move(value));
      return {};
    case Target::Kind::kNamespaceAttr:
      return exec_set_namespace(target, std::move(value), frame);
    case Target::Kind::kTuple: {
      std::vector<Value> materialized;
      const std::vector<Value>* items = nullptr;
      if (value.is_list()) {
        items = &value.as_list().items;  // the common `for k, v in d.items()`
      } else {
        auto r = py_iterate(value);
        if (!r.ok()) {
          return error_at(target.line, target.column,
                          fmt::format("cannot unpack non-iterable {} object", py_type_name(value)));
        }
        materialized = std::move(r).value();
        items = &materialized;
      }
      if (items->size() != target.items.size()) {
        return error_at(
            target.line, target.column,
            items->size() < target.items.size()
                ? fmt::format("not enough values to unpack (expected {}, got {})", target.items.size(), items->size())
                : fmt::format("too many values to unpack (expected {})", target.items.size()));
      }
      for (size_t i = 0; i < target.items.size(); ++i) M2_RETURN_IF_ERROR(assign(target.items[i], (*items)[i], frame));
      return {};
    }
  }
  return {};
}

// ---- expressions --------------------------------------------------------------

Result<Value> Interpreter::eval(const Expr& e, Frame& frame) {
  switch (e.kind) {
    case ExprKind::kConst:
      return static_cast<const Const&>(e).value;
    case ExprKind::kName:
      return lookup(static_cast<const Name&>(e).slot, frame);
    case ExprKind::kGetattr: {
      const auto& node = static_cast<const Getattr&>(e);
      M2_ASSIGN_OR_RETURN(Value obj, eval(*node.object, frame));
      return located(e, get_attr(obj, node.attr));
    }
    case ExprKind::kGetitem: {
      const auto& node = static_cast<const Getitem&>(e);
      M2_ASSIGN_OR_RETURN(Value obj, eval(*node.object, frame));
      if (node.index->kind == ExprKind::kSlice) {
        const auto& s = static_cast<const ast::Slice&>(*node.index);
        Value parts[3];
        const Expr* exprs[3] = {s.start.get(), s.stop.get(), s.step.get()};
        for (int i = 0; i < 3; ++i) {
          if (exprs[i]) {
            M2_ASSIGN_OR_RETURN(parts[i], eval(*exprs[i], frame));
          }
        }
        return located(e, get_slice(obj, exprs[0] ? &parts[0] : nullptr, exprs[1] ? &parts[1] : nullptr,
                                    exprs[2] ? &parts[2] : nullptr));
      }
      M2_ASSIGN_OR_RETURN(Value key, eval(*node.index, frame));
      return located(e, get_item(obj, key));
    }
    case ExprKind::kSlice:
      return error_at(e.line, e.column, "slice outside of a subscript");
    case ExprKind::kCall:
      return eval_call(static_cast<const Call&>(e), frame);
    case ExprKind::kFilter: {
      const auto& node = static_cast<const ast::Filter&>(e);
      M2_ASSIGN_OR_RETURN(Value operand, eval(*node.operand, frame));
      return apply_filter(node, std::move(operand), frame);
    }
    case ExprKind::kTest: {
      const auto& node = static_cast<const ast::Test&>(e);
      M2_ASSIGN_OR_RETURN(Value operand, eval(*node.operand, frame));
      if (!node.fn) {
        return error_at(
            e.line, e.column,
            node.name == "filter" || node.name == "test"
                ? fmt::format("the '{}' test is not supported by m2cpp's chat-template interpreter", node.name)
                : fmt::format("No test named '{}' found.", node.name));
      }
      M2_ASSIGN_OR_RETURN(CallArgs args, eval_args(node.args, frame));
      M2_ASSIGN_OR_RETURN(bool r, located(e, node.fn(operand, args)));
      return Value::boolean(r);
    }
    case ExprKind::kNot: {
      M2_ASSIGN_OR_RETURN(Value v, eval(*static_cast<const Unary&>(e).operand, frame));
      return Value::boolean(!v.truthy());
    }
    case ExprKind::kNeg:
    case ExprKind::kPos: {
      M2_ASSIGN_OR_RETURN(Value v, eval(*static_cast<const Unary&>(e).operand, frame));
      return located(e, e.kind == ExprKind::kNeg ? py_negate(v) : py_positive(v));
    }
    case ExprKind::kBinary: {
      const auto& node = static_cast<const Binary&>(e);
      M2_ASSIGN_OR_RETURN(Value l, eval(*node.left, frame));
      M2_ASSIGN_OR_RETURN(Value r, eval(*node.right, frame));
      return located(e, py_binary(node.op, l, r));
    }
    case ExprKind::kAnd:
    case ExprKind::kOr: {
      // Python's and/or return an operand, not a bool.
      const auto& node = static_cast<const Binary&>(e);
      M2_ASSIGN_OR_RETURN(Value l, eval(*node.left, frame));
      if (l.truthy() == (e.kind == ExprKind::kOr)) return l;
      return eval(*node.right, frame);
    }
    case ExprKind::kConcat: {
      std::string s;
      for (const auto& part : static_cast<const Concat&>(e).parts) {
        M2_ASSIGN_OR_RETURN(Value v, eval(*part, frame));
        append_py_str(v, &s);
      }
      return Value::string(std::move(s));
    }
    case ExprKind::kCompare:
      return eval_compare(static_cast<const Compare&>(e), frame);
    case ExprKind::kCondExpr: {
      const auto& node = static_cast<const CondExpr&>(e);
      M2_ASSIGN_OR_RETURN(Value test, eval(*node.test, frame));
      if (test.truthy()) return eval(*node.then_expr, frame);
      if (node.else_expr) return eval(*node.else_expr, frame);
      return Value::undefined(fmt::format(
          "the inline if-expression on line {} evaluated to false and no else section was defined.", e.line));
    }
    case ExprKind::kList:
    case ExprKind::kTuple: {
      std::vector<Value> items;
      for (const auto& item : static_cast<const Sequence&>(e).items) {
        M2_ASSIGN_OR_RETURN(Value v, eval(*item, frame));
        items.push_back(std::move(v));
      }
      return Value::list(std::move(items), e.kind == ExprKind::kList ? SeqKind::kList : SeqKind::kTuple);
    }
    case ExprKind::kDict: {
      Dict d;
      for (const auto& [k, v] : static_cast<const DictExpr&>(e).items) {
        M2_ASSIGN_OR_RETURN(Value key, eval(*k, frame));
        if (!key.is_string()) {
          return error_at(
              k->line, k->column,
              fmt::format("dict keys must be strings in m2cpp's chat templates, got {}", py_type_name(key)));
        }
        M2_ASSIGN_OR_RETURN(Value value, eval(*v, frame));
        d.set(key.as_string(), std::move(value));
      }
      return Value::dict(std::move(d));
    }
  }
  return error_at(e.line, e.column, "unknown expression");
}

Result<Value> Interpreter::eval_compare(const Compare& node, Frame& frame) {
  M2_ASSIGN_OR_RETURN(Value left, eval(*node.first, frame));
  for (const auto& [op, expr] : node.rest) {
    M2_ASSIGN_OR_RETURN(Value right, eval(*expr, frame));
    bool r = false;
    switch (op) {
      case CmpOp::kEq:
        r = py_equal(left, right);
        break;
      case CmpOp::kNe:
        r = !py_equal(left, right);
        break;
      case CmpOp::kIn:
      case CmpOp::kNotIn: {
        M2_ASSIGN_OR_RETURN(bool in, located(*expr, py_contains(right, left)));
        r = (op == CmpOp::kIn) == in;
        break;
      }
      default: {
        M2_ASSIGN_OR_RETURN(r, located(*expr, py_order(op, left, right)));
      }
    }
    if (!r) return Value::boolean(false);
    left = std::move(right);
  }
  return Value::boolean(true);
}

Result<CallArgs> Interpreter::eval_args(const Args& args, Frame& frame) {
  CallArgs out;
  out.positional.reserve(args.positional.size());
  for (const auto& a : args.positional) {
    M2_ASSIGN_OR_RETURN(Value v, eval(*a, frame));
    out.positional.push_back(std::move(v));
  }
  if (args.dyn_args) {
    M2_ASSIGN_OR_RETURN(Value v, eval(*args.dyn_args, frame));
    M2_ASSIGN_OR_RETURN(auto items, located(*args.dyn_args, py_iterate(v)));
    for (auto& item : items) out.positional.push_back(std::move(item));
  }
  for (const auto& k : args.keywords) {
    M2_ASSIGN_OR_RETURN(Value v, eval(*k.value, frame));
    out.keywords.emplace_back(k.name, std::move(v));
  }
  if (args.dyn_kwargs) {
    M2_ASSIGN_OR_RETURN(Value v, eval(*args.dyn_kwargs, frame));
    if (!v.is_dict()) {
      return error_at(args.dyn_kwargs->line, args.dyn_kwargs->column,
                      fmt::format("argument after ** must be a mapping, not {}", py_type_name(v)));
    }
    for (const auto& [k, x] : v.as_dict().entries) out.keywords.emplace_back(k, x);
  }
  return out;
}

Result<Value> Interpreter::apply_filter(const ast::Filter& node, Value operand, Frame& frame) {
  if (!node.fn) {
    return error_at(node.line, node.column,
                    fmt::format("No filter named '{}' found (or it is not supported by m2cpp's chat-template "
                                "interpreter).",
                                node.name));
  }
  M2_ASSIGN_OR_RETURN(CallArgs args, eval_args(node.args, frame));
  return located(node, node.fn(operand, args));
}

Result<Value> Interpreter::apply_filter_chain(const Expr* filter, Value input, Frame& frame) {
  const auto& node = static_cast<const ast::Filter&>(*filter);
  Value operand = std::move(input);
  if (node.operand) {
    M2_ASSIGN_OR_RETURN(operand, apply_filter_chain(node.operand.get(), std::move(operand), frame));
  }
  return apply_filter(node, std::move(operand), frame);
}

Result<Value> Interpreter::eval_call(const Call& node, Frame& frame) {
  // obj.method(...): call Python methods directly, without a bound-method
  // object; anything else (macros in namespaces, undefined, ...) takes the
  // general path.
  if (node.callee->kind == ExprKind::kGetattr) {
    const auto& ga = static_cast<const Getattr&>(*node.callee);
    M2_ASSIGN_OR_RETURN(Value obj, eval(*ga.object, frame));
    if (method_kind(obj, ga.attr) == MethodKind::kAllowed && obj.kind() != ValueKind::kNamespace) {
      M2_ASSIGN_OR_RETURN(CallArgs args, eval_args(node.args, frame));
      return located(node, call_method(obj, ga.attr, args));
    }
    M2_ASSIGN_OR_RETURN(Value callee, located(*node.callee, get_attr(obj, ga.attr)));
    M2_ASSIGN_OR_RETURN(CallArgs args, eval_args(node.args, frame));
    return call_value(callee, std::move(args), node);
  }
  M2_ASSIGN_OR_RETURN(Value callee, eval(*node.callee, frame));
  M2_ASSIGN_OR_RETURN(CallArgs args, eval_args(node.args, frame));
  return call_value(callee, std::move(args), node);
}

Result<Value> Interpreter::call_value(const Value& callee, CallArgs args, const Expr& at) {
  if (callee.is_undefined()) return located(at, undefined_error(callee));
  if (callee.kind() != ValueKind::kCallable) {
    if (callee.kind() == ValueKind::kLoop) {
      return error_at(at.line, at.column,
                      "recursive loop() calls are not supported by m2cpp's chat-template interpreter");
    }
    return error_at(at.line, at.column, fmt::format("'{}' object is not callable", py_type_name(callee)));
  }
  const Callable& c = callee.as_callable();
  switch (c.type) {
    case Callable::Type::kMacro:
      return call_macro(c, std::move(args), at);
    case Callable::Type::kGlobal:
      return located(at, c.global(args));
    case Callable::Type::kMethod:
      return located(at, call_method(c.receiver, c.name, args));
  }
  return error_at(at.line, at.column, "unknown callable");
}

Result<Value> Interpreter::call_macro(const Callable& c, CallArgs args, const Expr& at) {
  const Macro& m = *c.macro;
  M2_RETURN_IF_ERROR(step(at.line, at.column));
  if (macro_depth_ >= kMaxMacroDepth) {
    return error_at(at.line, at.column, fmt::format("macro '{}' nested deeper than {} calls", m.name, kMaxMacroDepth));
  }
  auto frame = std::make_shared<Frame>();
  frame->parent = c.closure;
  const size_t n = m.params.size();
  std::vector<bool> bound(n, false);
  std::vector<Value> extra;
  for (size_t i = 0; i < args.positional.size(); ++i) {
    if (i < n) {
      frame->set(m.param_slots[i], std::move(args.positional[i]));
      bound[i] = true;
    } else if (m.uses_varargs) {
      extra.push_back(std::move(args.positional[i]));
    } else {
      return error_at(at.line, at.column, fmt::format("macro '{}' takes not more than {} argument(s)", m.name, n));
    }
  }
  Dict extra_kw;
  for (auto& [name, value] : args.keywords) {
    size_t i = 0;
    while (i < n && m.params[i] != name) ++i;
    if (i < n) {
      if (bound[i])
        return error_at(at.line, at.column,
                        fmt::format("macro '{}' got multiple values for argument '{}'", m.name, name));
      frame->set(m.param_slots[i], std::move(value));
      bound[i] = true;
    } else if (m.uses_kwargs) {
      extra_kw.set(name, std::move(value));
    } else {
      return error_at(at.line, at.column, fmt::format("macro '{}' takes no keyword argument '{}'", m.name, name));
    }
  }
  // Defaults are evaluated in the macro's own scope, so `b=a` sees `a`.
  const size_t first_default = n - m.defaults.size();
  for (size_t i = 0; i < n; ++i) {
    if (bound[i]) continue;
    if (i >= first_default) {
      M2_ASSIGN_OR_RETURN(Value v, eval(*m.defaults[i - first_default], *frame));
      frame->set(m.param_slots[i], std::move(v));
    } else {
      frame->set(m.param_slots[i], Value::undefined(fmt::format("parameter '{}' was not provided", m.params[i])));
    }
  }
  if (m.uses_varargs) frame->set(m.varargs_slot, Value::list(std::move(extra), SeqKind::kTuple));
  if (m.uses_kwargs) frame->set(m.kwargs_slot, Value::dict(std::move(extra_kw)));
  ++macro_depth_;
  std::string buf;
  auto flow = exec_body(m.body, frame, &buf);
  --macro_depth_;
  if (!flow.ok()) return flow.status();
  return Value::string(std::move(buf));
}

}  // namespace m2::text::jinja
