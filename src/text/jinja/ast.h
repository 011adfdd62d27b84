// Syntax tree of a parsed template, mirroring jinja2.nodes for the subset we
// implement. Every node carries the line and column of the token it starts
// at, so runtime errors can name the template position. Names are interned
// to integer slots at parse time; the evaluator's scopes index by slot.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "text/jinja/value.h"

namespace m2::text::jinja {

struct CallArgs;

namespace ast {

enum class ExprKind : uint8_t {
  kConst,
  kName,
  kGetattr,
  kGetitem,
  kSlice,
  kCall,
  kFilter,
  kTest,
  kNot,
  kNeg,
  kPos,
  kBinary,
  kAnd,
  kOr,
  kConcat,
  kCompare,
  kCondExpr,
  kList,
  kTuple,
  kDict,
};

enum class BinOp : uint8_t { kAdd, kSub, kMul, kDiv, kFloorDiv, kMod, kPow };
enum class CmpOp : uint8_t { kEq, kNe, kLt, kLe, kGt, kGe, kIn, kNotIn };

struct Expr {
  explicit Expr(ExprKind k) : kind(k) {}
  virtual ~Expr() = default;
  ExprKind kind;
  int line = 0, column = 0;
};
using ExprPtr = std::unique_ptr<Expr>;

struct Const : Expr {
  Const() : Expr(ExprKind::kConst) {}
  Value value;
};

struct Name : Expr {
  Name() : Expr(ExprKind::kName) {}
  std::string name;
  int slot = -1;
};

struct Getattr : Expr {
  Getattr() : Expr(ExprKind::kGetattr) {}
  ExprPtr object;
  std::string attr;
};

struct Getitem : Expr {
  Getitem() : Expr(ExprKind::kGetitem) {}
  ExprPtr object, index;
};

// a[start:stop:step]; absent parts are null.
struct Slice : Expr {
  Slice() : Expr(ExprKind::kSlice) {}
  ExprPtr start, stop, step;
};

struct Keyword {
  std::string name;
  ExprPtr value;
};

struct Args {
  std::vector<ExprPtr> positional;
  std::vector<Keyword> keywords;
  ExprPtr dyn_args, dyn_kwargs;  // *args, **kwargs
};

struct Call : Expr {
  Call() : Expr(ExprKind::kCall) {}
  ExprPtr callee;
  Args args;
};

using FilterFn = Result<Value> (*)(const Value& operand, const CallArgs& args);
using TestFn = Result<bool> (*)(const Value& operand, const CallArgs& args);

struct Filter : Expr {
  Filter() : Expr(ExprKind::kFilter) {}
  ExprPtr operand;  // null for the filter of {% filter %} and {% set %} blocks
  std::string name;
  FilterFn fn = nullptr;
  Args args;
};

struct Test : Expr {
  Test() : Expr(ExprKind::kTest) {}
  ExprPtr operand;
  std::string name;
  TestFn fn = nullptr;
  Args args;
};

// kNot, kNeg, kPos
struct Unary : Expr {
  explicit Unary(ExprKind k) : Expr(k) {}
  ExprPtr operand;
};

// kBinary (arithmetic, op), kAnd, kOr
struct Binary : Expr {
  explicit Binary(ExprKind k) : Expr(k) {}
  BinOp op = BinOp::kAdd;
  ExprPtr left, right;
};

struct Concat : Expr {
  Concat() : Expr(ExprKind::kConcat) {}
  std::vector<ExprPtr> parts;
};

// a < b <= c: Python chained comparison.
struct Compare : Expr {
  Compare() : Expr(ExprKind::kCompare) {}
  ExprPtr first;
  std::vector<std::pair<CmpOp, ExprPtr>> rest;
};

struct CondExpr : Expr {
  CondExpr() : Expr(ExprKind::kCondExpr) {}
  ExprPtr test, then_expr, else_expr;  // else_expr may be null
};

// kList, kTuple
struct Sequence : Expr {
  explicit Sequence(ExprKind k) : Expr(k) {}
  std::vector<ExprPtr> items;
};

struct DictExpr : Expr {
  DictExpr() : Expr(ExprKind::kDict) {}
  std::vector<std::pair<ExprPtr, ExprPtr>> items;
};

// Left side of set/for/with: a name, a (nested) tuple of names, or ns.attr.
struct Target {
  enum class Kind : uint8_t { kName, kTuple, kNamespaceAttr } kind = Kind::kName;
  int line = 0, column = 0;
  std::string name;  // kName, kNamespaceAttr (the namespace variable)
  int slot = -1;
  std::string attr;           // kNamespaceAttr
  std::vector<Target> items;  // kTuple
};

enum class StmtKind : uint8_t {
  kOutput,
  kIf,
  kFor,
  kSet,
  kSetBlock,
  kMacro,
  kFilterBlock,
  kWith,
  kBreak,
  kContinue,
  kScope,
};

struct Stmt {
  explicit Stmt(StmtKind k) : kind(k) {}
  virtual ~Stmt() = default;
  StmtKind kind;
  int line = 0, column = 0;
};
using StmtPtr = std::unique_ptr<Stmt>;
using Body = std::vector<StmtPtr>;

// Template text and {{ expressions }}, in order; text parts have no expr.
struct Output : Stmt {
  Output() : Stmt(StmtKind::kOutput) {}
  struct Part {
    std::string text;
    ExprPtr expr;
  };
  std::vector<Part> parts;
};

struct If : Stmt {
  If() : Stmt(StmtKind::kIf) {}
  std::vector<std::pair<ExprPtr, Body>> branches;  // if, elif...
  Body else_body;
};

struct For : Stmt {
  For() : Stmt(StmtKind::kFor) {}
  Target target;
  ExprPtr iter;
  ExprPtr filter;  // {% for x in y if cond %}
  Body body, else_body;
};

struct Set : Stmt {
  Set() : Stmt(StmtKind::kSet) {}
  Target target;
  ExprPtr value;
};

struct SetBlock : Stmt {
  SetBlock() : Stmt(StmtKind::kSetBlock) {}
  Target target;
  ExprPtr filter;  // chain of Filter nodes ending in a null operand, or null
  Body body;
};

struct Macro : Stmt {
  Macro() : Stmt(StmtKind::kMacro) {}
  std::string name;
  int slot = -1;
  std::vector<std::string> params;
  std::vector<int> param_slots;
  std::vector<ExprPtr> defaults;  // for the last defaults.size() params
  Body body;
  bool uses_varargs = false, uses_kwargs = false;
  int varargs_slot = -1, kwargs_slot = -1;
};

struct FilterBlock : Stmt {
  FilterBlock() : Stmt(StmtKind::kFilterBlock) {}
  ExprPtr filter;  // chain of Filter nodes ending in a null operand
  Body body;
};

struct With : Stmt {
  With() : Stmt(StmtKind::kWith) {}
  std::vector<Target> targets;
  std::vector<ExprPtr> values;
  Body body;
};

// kBreak, kContinue
struct LoopControl : Stmt {
  explicit LoopControl(StmtKind k) : Stmt(k) {}
};

// A body rendered in place: {% generation %} (transformers' assistant-mask
// extension, which renders its content unchanged).
struct Scope : Stmt {
  Scope() : Stmt(StmtKind::kScope) {}
  Body body;
};

}  // namespace ast

// A parsed template: its statements and the interned variable names.
struct Program {
  ast::Body body;
  std::vector<std::string> symbols;  // slot -> name
  int loop_slot = -1;                // slot of `loop`, -1 when never named
};

}  // namespace m2::text::jinja
