// Expression productions of the Jinja parser, in jinja2/parser.py's order of
// precedence (loosest first): inline if, or, and, not, comparisons (chained,
// `in`, `not in`), + -, ~, * / // %, **, unary - +, then primaries with
// postfix (.attr, [item], calls) and filters/tests.
#include <fmt/format.h>

#include <algorithm>

#include "text/jinja/builtins.h"
#include "text/jinja/parser_impl.h"

namespace m2::text::jinja {

using namespace ast;

namespace {

// Counts recursion through the expression grammar; parse errors abort the
// whole parse, so the counter needs no unwinding on failure.
struct DepthGuard {
  int* depth;
  explicit DepthGuard(int* d) : depth(d) { ++*depth; }
  ~DepthGuard() { --*depth; }
  bool too_deep() const { return *depth > kMaxParseDepth; }
};

template <typename T>
ExprPtr own(std::unique_ptr<T> p) {
  return ExprPtr(std::move(p));
}

}  // namespace

bool Parser::is_tuple_end(const std::vector<const char*>& extra_end) const {
  const Token& t = cur();
  if (t.type == Tok::kVariableEnd || t.type == Tok::kBlockEnd || (t.type == Tok::kOperator && t.op == Op::kRParen)) {
    return true;
  }
  return t.type == Tok::kName &&
         std::any_of(extra_end.begin(), extra_end.end(), [&](const char* e) { return t.text == e; });
}

Result<ExprPtr> Parser::parse_expression(bool with_condexpr) {
  DepthGuard guard(&depth_);
  if (guard.too_deep()) return fail(cur(), "expression nested too deeply");
  return with_condexpr ? parse_condexpr() : parse_or();
}

Result<ExprPtr> Parser::parse_condexpr() {
  Token start = cur();
  M2_ASSIGN_OR_RETURN(ExprPtr expr1, parse_or());
  while (skip_name("if")) {
    auto node = std::make_unique<CondExpr>();
    place(node.get(), start);
    M2_ASSIGN_OR_RETURN(node->test, parse_or());
    if (skip_name("else")) {
      M2_ASSIGN_OR_RETURN(node->else_expr, parse_condexpr());
    }
    node->then_expr = std::move(expr1);
    expr1 = own(std::move(node));
    start = cur();
  }
  return expr1;
}

Result<ExprPtr> Parser::parse_or() {
  const Token start = cur();
  M2_ASSIGN_OR_RETURN(ExprPtr left, parse_and());
  while (skip_name("or")) {
    auto node = std::make_unique<Binary>(ExprKind::kOr);
    place(node.get(), start);
    node->left = std::move(left);
    M2_ASSIGN_OR_RETURN(node->right, parse_and());
    left = own(std::move(node));
  }
  return left;
}

Result<ExprPtr> Parser::parse_and() {
  const Token start = cur();
  M2_ASSIGN_OR_RETURN(ExprPtr left, parse_not());
  while (skip_name("and")) {
    auto node = std::make_unique<Binary>(ExprKind::kAnd);
    place(node.get(), start);
    node->left = std::move(left);
    M2_ASSIGN_OR_RETURN(node->right, parse_not());
    left = own(std::move(node));
  }
  return left;
}

Result<ExprPtr> Parser::parse_not() {
  if (at_name("not")) {
    DepthGuard guard(&depth_);
    if (guard.too_deep()) return fail(cur(), "expression nested too deeply");
    auto node = std::make_unique<Unary>(ExprKind::kNot);
    place(node.get(), cur());
    next();
    M2_ASSIGN_OR_RETURN(node->operand, parse_not());
    return own(std::move(node));
  }
  return parse_compare();
}

Result<ExprPtr> Parser::parse_compare() {
  const Token start = cur();
  M2_ASSIGN_OR_RETURN(ExprPtr expr, parse_math1());
  std::unique_ptr<Compare> node;
  while (true) {
    CmpOp op;
    const Token& t = cur();
    if (t.type == Tok::kOperator && (t.op == Op::kEq || t.op == Op::kNe || t.op == Op::kLt || t.op == Op::kLe ||
                                     t.op == Op::kGt || t.op == Op::kGe)) {
      op = t.op == Op::kEq   ? CmpOp::kEq
           : t.op == Op::kNe ? CmpOp::kNe
           : t.op == Op::kLt ? CmpOp::kLt
           : t.op == Op::kLe ? CmpOp::kLe
           : t.op == Op::kGt ? CmpOp::kGt
                             : CmpOp::kGe;
      next();
    } else if (skip_name("in")) {
      op = CmpOp::kIn;
    } else if (at_name("not") && look().type == Tok::kName && look().text == "in") {
      next();
      next();
      op = CmpOp::kNotIn;
    } else {
      break;
    }
    if (!node) {
      node = std::make_unique<Compare>();
      place(node.get(), start);
      node->first = std::move(expr);
    }
    M2_ASSIGN_OR_RETURN(ExprPtr operand, parse_math1());
    node->rest.emplace_back(op, std::move(operand));
  }
  if (!node) return expr;
  return own(std::move(node));
}

Result<ExprPtr> Parser::parse_math1() {
  const Token start = cur();
  M2_ASSIGN_OR_RETURN(ExprPtr left, parse_concat());
  while (at_op(Op::kAdd) || at_op(Op::kSub)) {
    auto node = std::make_unique<Binary>(ExprKind::kBinary);
    place(node.get(), start);
    node->op = at_op(Op::kAdd) ? BinOp::kAdd : BinOp::kSub;
    next();
    node->left = std::move(left);
    M2_ASSIGN_OR_RETURN(node->right, parse_concat());
    left = own(std::move(node));
  }
  return left;
}

Result<ExprPtr> Parser::parse_concat() {
  const Token start = cur();
  M2_ASSIGN_OR_RETURN(ExprPtr first, parse_math2());
  if (!at_op(Op::kTilde)) return first;
  auto node = std::make_unique<Concat>();
  place(node.get(), start);
  node->parts.push_back(std::move(first));
  while (skip_op(Op::kTilde)) {
    M2_ASSIGN_OR_RETURN(ExprPtr part, parse_math2());
    node->parts.push_back(std::move(part));
  }
  return own(std::move(node));
}

Result<ExprPtr> Parser::parse_math2() {
  const Token start = cur();
  M2_ASSIGN_OR_RETURN(ExprPtr left, parse_pow());
  while (at_op(Op::kMul) || at_op(Op::kDiv) || at_op(Op::kFloorDiv) || at_op(Op::kMod)) {
    auto node = std::make_unique<Binary>(ExprKind::kBinary);
    place(node.get(), start);
    const Op op = cur().op;
    node->op = op == Op::kMul        ? BinOp::kMul
               : op == Op::kDiv      ? BinOp::kDiv
               : op == Op::kFloorDiv ? BinOp::kFloorDiv
                                     : BinOp::kMod;
    next();
    node->left = std::move(left);
    M2_ASSIGN_OR_RETURN(node->right, parse_pow());
    left = own(std::move(node));
  }
  return left;
}

Result<ExprPtr> Parser::parse_pow() {
  const Token start = cur();
  M2_ASSIGN_OR_RETURN(ExprPtr left, parse_unary(true));
  while (skip_op(Op::kPow)) {
    auto node = std::make_unique<Binary>(ExprKind::kBinary);
    place(node.get(), start);
    node->op = BinOp::kPow;
    node->left = std::move(left);
    M2_ASSIGN_OR_RETURN(node->right, parse_unary(true));
    left = own(std::move(node));
  }
  return left;
}

Result<ExprPtr> Parser::parse_unary(bool with_filter) {
  DepthGuard guard(&depth_);
  if (guard.too_deep()) return fail(cur(), "expression nested too deeply");
  ExprPtr node;
  if (at_op(Op::kSub) || at_op(Op::kAdd)) {
    auto u = std::make_unique<Unary>(at_op(Op::kSub) ? ExprKind::kNeg : ExprKind::kPos);
    place(u.get(), cur());
    next();
    M2_ASSIGN_OR_RETURN(u->operand, parse_unary(false));
    node = own(std::move(u));
  } else {
    M2_ASSIGN_OR_RETURN(node, parse_primary());
  }
  M2_ASSIGN_OR_RETURN(node, parse_postfix(std::move(node)));
  if (with_filter) {
    M2_ASSIGN_OR_RETURN(node, parse_filter_expr(std::move(node)));
  }
  return node;
}

Result<ExprPtr> Parser::parse_primary() {
  const Token& t = cur();
  if (t.type == Tok::kName) {
    auto c = std::make_unique<Const>();
    place(c.get(), t);
    if (t.text == "true" || t.text == "True" || t.text == "false" || t.text == "False") {
      c->value = Value::boolean(t.text == "true" || t.text == "True");
      next();
      return own(std::move(c));
    }
    if (t.text == "none" || t.text == "None") {
      c->value = Value::none();
      next();
      return own(std::move(c));
    }
    auto n = std::make_unique<Name>();
    place(n.get(), t);
    n->name = t.text;
    n->slot = intern(t.text);
    if (!macros_.empty() && t.text == "varargs") macros_.back()->uses_varargs = true;
    if (!macros_.empty() && t.text == "kwargs") macros_.back()->uses_kwargs = true;
    next();
    return own(std::move(n));
  }
  if (t.type == Tok::kString) {
    auto c = std::make_unique<Const>();
    place(c.get(), t);
    std::string s;
    while (cur().type == Tok::kString) {  // adjacent literals concatenate
      s += cur().text;
      next();
    }
    c->value = Value::string(std::move(s));
    return own(std::move(c));
  }
  if (t.type == Tok::kInteger || t.type == Tok::kFloat) {
    auto c = std::make_unique<Const>();
    place(c.get(), t);
    c->value = t.type == Tok::kInteger ? Value::integer(t.int_value) : Value::real(t.float_value);
    next();
    return own(std::move(c));
  }
  if (t.type == Tok::kOperator && t.op == Op::kLParen) {
    next();
    M2_ASSIGN_OR_RETURN(ExprPtr inner, parse_tuple(true, {}, true));
    M2_RETURN_IF_ERROR(expect_op(Op::kRParen));
    return inner;
  }
  if (t.type == Tok::kOperator && t.op == Op::kLBracket) return parse_list();
  if (t.type == Tok::kOperator && t.op == Op::kLBrace) return parse_dict();
  if (t.type == Tok::kEof) return fail(t, "unexpected end of template");
  return fail(t, fmt::format("unexpected '{}'", describe(t)));
}

Result<ExprPtr> Parser::parse_tuple(bool with_condexpr, const std::vector<const char*>& extra_end,
                                    bool explicit_parentheses) {
  auto tuple = std::make_unique<Sequence>(ExprKind::kTuple);
  place(tuple.get(), cur());
  bool is_tuple = false;
  while (true) {
    if (!tuple->items.empty()) M2_RETURN_IF_ERROR(expect_op(Op::kComma));
    if (is_tuple_end(extra_end)) break;
    M2_ASSIGN_OR_RETURN(ExprPtr item, parse_expression(with_condexpr));
    tuple->items.push_back(std::move(item));
    if (at_op(Op::kComma)) {
      is_tuple = true;
    } else {
      break;
    }
  }
  if (!is_tuple) {
    if (!tuple->items.empty()) return std::move(tuple->items[0]);
    if (!explicit_parentheses) return fail(cur(), fmt::format("Expected an expression, got '{}'", describe(cur())));
  }
  return own(std::move(tuple));
}

Result<ExprPtr> Parser::parse_list() {
  auto node = std::make_unique<Sequence>(ExprKind::kList);
  place(node.get(), cur());
  M2_RETURN_IF_ERROR(expect_op(Op::kLBracket));
  while (!at_op(Op::kRBracket)) {
    if (!node->items.empty()) M2_RETURN_IF_ERROR(expect_op(Op::kComma));
    if (at_op(Op::kRBracket)) break;
    M2_ASSIGN_OR_RETURN(ExprPtr item, parse_expression());
    node->items.push_back(std::move(item));
  }
  M2_RETURN_IF_ERROR(expect_op(Op::kRBracket));
  return own(std::move(node));
}

Result<ExprPtr> Parser::parse_dict() {
  auto node = std::make_unique<DictExpr>();
  place(node.get(), cur());
  M2_RETURN_IF_ERROR(expect_op(Op::kLBrace));
  while (!at_op(Op::kRBrace)) {
    if (!node->items.empty()) M2_RETURN_IF_ERROR(expect_op(Op::kComma));
    if (at_op(Op::kRBrace)) break;
    M2_ASSIGN_OR_RETURN(ExprPtr key, parse_expression());
    M2_RETURN_IF_ERROR(expect_op(Op::kColon));
    M2_ASSIGN_OR_RETURN(ExprPtr value, parse_expression());
    node->items.emplace_back(std::move(key), std::move(value));
  }
  M2_RETURN_IF_ERROR(expect_op(Op::kRBrace));
  return own(std::move(node));
}

Result<ExprPtr> Parser::parse_postfix(ExprPtr node) {
  while (true) {
    if (at_op(Op::kDot) || at_op(Op::kLBracket)) {
      M2_ASSIGN_OR_RETURN(node, parse_subscript(std::move(node)));
    } else if (at_op(Op::kLParen)) {
      M2_ASSIGN_OR_RETURN(node, parse_call(std::move(node)));
    } else {
      return node;
    }
  }
}

Result<ExprPtr> Parser::parse_filter_expr(ExprPtr node) {
  while (true) {
    if (at_op(Op::kPipe)) {
      M2_ASSIGN_OR_RETURN(node, parse_filter(std::move(node), false));
    } else if (at_name("is")) {
      M2_ASSIGN_OR_RETURN(node, parse_test(std::move(node)));
    } else if (at_op(Op::kLParen)) {
      M2_ASSIGN_OR_RETURN(node, parse_call(std::move(node)));
    } else {
      return node;
    }
  }
}

Result<ExprPtr> Parser::parse_subscript(ExprPtr node) {
  const Token t = cur();
  next();
  if (t.op == Op::kDot) {
    const Token attr = cur();
    next();
    if (attr.type == Tok::kName) {
      auto g = std::make_unique<Getattr>();
      place(g.get(), t);
      g->object = std::move(node);
      g->attr = attr.text;
      return own(std::move(g));
    }
    if (attr.type != Tok::kInteger) return fail(attr, "expected name or number");
    auto g = std::make_unique<Getitem>();
    place(g.get(), t);
    g->object = std::move(node);
    auto c = std::make_unique<Const>();
    place(c.get(), attr);
    c->value = Value::integer(attr.int_value);
    g->index = own(std::move(c));
    return own(std::move(g));
  }
  std::vector<ExprPtr> args;
  while (!at_op(Op::kRBracket)) {
    if (!args.empty()) M2_RETURN_IF_ERROR(expect_op(Op::kComma));
    M2_ASSIGN_OR_RETURN(ExprPtr a, parse_subscribed());
    args.push_back(std::move(a));
  }
  M2_RETURN_IF_ERROR(expect_op(Op::kRBracket));
  auto g = std::make_unique<Getitem>();
  place(g.get(), t);
  g->object = std::move(node);
  if (args.size() == 1) {
    g->index = std::move(args[0]);
  } else {
    auto tuple = std::make_unique<Sequence>(ExprKind::kTuple);
    place(tuple.get(), t);
    tuple->items = std::move(args);
    g->index = own(std::move(tuple));
  }
  return own(std::move(g));
}

Result<ExprPtr> Parser::parse_subscribed() {
  auto slice = std::make_unique<ast::Slice>();
  place(slice.get(), cur());
  if (skip_op(Op::kColon)) {
    // [:...]
  } else {
    M2_ASSIGN_OR_RETURN(ExprPtr start, parse_expression());
    if (!skip_op(Op::kColon)) return start;
    slice->start = std::move(start);
  }
  if (!at_op(Op::kColon) && !at_op(Op::kRBracket) && !at_op(Op::kComma)) {
    M2_ASSIGN_OR_RETURN(slice->stop, parse_expression());
  }
  if (skip_op(Op::kColon) && !at_op(Op::kRBracket) && !at_op(Op::kComma)) {
    M2_ASSIGN_OR_RETURN(slice->step, parse_expression());
  }
  return own(std::move(slice));
}

Status Parser::parse_call_args(Args* args) {
  const Token open = cur();
  M2_RETURN_IF_ERROR(expect_op(Op::kLParen));
  bool require_comma = false;
  auto ensure = [&](bool ok) -> Status {
    return ok ? Status() : fail(open, "invalid syntax for function call expression");
  };
  while (!at_op(Op::kRParen)) {
    if (require_comma) {
      M2_RETURN_IF_ERROR(expect_op(Op::kComma));
      if (at_op(Op::kRParen)) break;  // trailing comma
    }
    if (skip_op(Op::kMul)) {
      M2_RETURN_IF_ERROR(ensure(!args->dyn_args && !args->dyn_kwargs));
      M2_ASSIGN_OR_RETURN(args->dyn_args, parse_expression());
    } else if (skip_op(Op::kPow)) {
      M2_RETURN_IF_ERROR(ensure(!args->dyn_kwargs));
      M2_ASSIGN_OR_RETURN(args->dyn_kwargs, parse_expression());
    } else if (cur().type == Tok::kName && look().type == Tok::kOperator && look().op == Op::kAssign) {
      M2_RETURN_IF_ERROR(ensure(!args->dyn_kwargs));
      std::string key = cur().text;
      next();
      next();
      M2_ASSIGN_OR_RETURN(ExprPtr value, parse_expression());
      args->keywords.push_back({std::move(key), std::move(value)});
    } else {
      M2_RETURN_IF_ERROR(ensure(!args->dyn_args && !args->dyn_kwargs && args->keywords.empty()));
      M2_ASSIGN_OR_RETURN(ExprPtr value, parse_expression());
      args->positional.push_back(std::move(value));
    }
    require_comma = true;
  }
  return expect_op(Op::kRParen);
}

Result<ExprPtr> Parser::parse_call(ExprPtr node) {
  auto call = std::make_unique<Call>();
  place(call.get(), cur());
  M2_RETURN_IF_ERROR(parse_call_args(&call->args));
  call->callee = std::move(node);
  return own(std::move(call));
}

Result<ExprPtr> Parser::parse_filter(ExprPtr node, bool start_inline) {
  while (at_op(Op::kPipe) || start_inline) {
    if (!start_inline) next();
    const Token name_tok = cur();
    M2_ASSIGN_OR_RETURN(std::string name, expect_any_name());
    while (skip_op(Op::kDot)) {
      M2_ASSIGN_OR_RETURN(std::string part, expect_any_name());
      name += "." + part;
    }
    auto f = std::make_unique<ast::Filter>();
    place(f.get(), name_tok);
    f->name = name;
    f->fn = find_filter(name);
    if (at_op(Op::kLParen)) M2_RETURN_IF_ERROR(parse_call_args(&f->args));
    f->operand = std::move(node);
    node = own(std::move(f));
    start_inline = false;
  }
  return node;
}

Result<ExprPtr> Parser::parse_test(ExprPtr node) {
  const Token is_tok = cur();
  next();
  const bool negated = skip_name("not");
  M2_ASSIGN_OR_RETURN(std::string name, expect_any_name());
  while (skip_op(Op::kDot)) {
    M2_ASSIGN_OR_RETURN(std::string part, expect_any_name());
    name += "." + part;
  }
  auto t = std::make_unique<ast::Test>();
  place(t.get(), is_tok);
  t->name = name;
  t->fn = find_test(name);
  t->operand = std::move(node);
  const Token& c = cur();
  const bool arg_start = c.type == Tok::kName || c.type == Tok::kString || c.type == Tok::kInteger ||
                         c.type == Tok::kFloat ||
                         (c.type == Tok::kOperator && (c.op == Op::kLBracket || c.op == Op::kLBrace));
  if (at_op(Op::kLParen)) {
    M2_RETURN_IF_ERROR(parse_call_args(&t->args));
  } else if (arg_start && !at_name("else") && !at_name("or") && !at_name("and")) {
    // `x is divisibleby 3`: one argument without parentheses.
    if (at_name("is")) return fail(c, "You cannot chain multiple tests with is");
    M2_ASSIGN_OR_RETURN(ExprPtr arg, parse_primary());
    M2_ASSIGN_OR_RETURN(arg, parse_postfix(std::move(arg)));
    t->args.positional.push_back(std::move(arg));
  }
  if (!negated) return own(std::move(t));
  auto n = std::make_unique<Unary>(ExprKind::kNot);
  place(n.get(), is_tok);
  n->operand = own(std::move(t));
  return own(std::move(n));
}

}  // namespace m2::text::jinja
