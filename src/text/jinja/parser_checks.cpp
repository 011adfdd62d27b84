// The check Jinja's compiler makes after parsing: filters and tests must
// exist. Jinja reports an unknown one at compile time, except inside
// {% if %} statements and inline if-expressions (its "soft" frames), where
// the error waits until the filter actually runs. Filters that Jinja has but
// we do not implement always wait, so templates that never reach them still
// render.
#include <fmt/format.h>

#include <algorithm>

#include "text/jinja/parser_impl.h"

namespace m2::text::jinja {

using namespace ast;

namespace {

bool jinja_has_filter(std::string_view name) {
  static const char* const kOthers[] = {"filesizeformat", "forceescape", "format",    "groupby",  "pprint",
                                        "random",         "slice",       "striptags", "truncate", "urlencode",
                                        "urlize",         "wordwrap",    "xmlattr"};
  return std::any_of(std::begin(kOthers), std::end(kOthers), [&](const char* n) { return name == n; });
}

bool jinja_has_test(std::string_view name) { return name == "filter" || name == "test"; }

}  // namespace

Status Parser::check_expr(const Expr* e, bool soft) const {
  if (!e) return {};
  switch (e->kind) {
    case ExprKind::kFilter: {
      auto* f = static_cast<const ast::Filter*>(e);
      if (!f->fn && !soft && !jinja_has_filter(f->name)) {
        return error_at(f->line, f->column, fmt::format("No filter named '{}'.", f->name));
      }
      M2_RETURN_IF_ERROR(check_expr(f->operand.get(), soft));
      for (const auto& a : f->args.positional) M2_RETURN_IF_ERROR(check_expr(a.get(), soft));
      for (const auto& k : f->args.keywords) M2_RETURN_IF_ERROR(check_expr(k.value.get(), soft));
      M2_RETURN_IF_ERROR(check_expr(f->args.dyn_args.get(), soft));
      return check_expr(f->args.dyn_kwargs.get(), soft);
    }
    case ExprKind::kTest: {
      auto* t = static_cast<const ast::Test*>(e);
      if (!t->fn && !soft && !jinja_has_test(t->name)) {
        return error_at(t->line, t->column, fmt::format("No test named '{}'.", t->name));
      }
      M2_RETURN_IF_ERROR(check_expr(t->operand.get(), soft));
      for (const auto& a : t->args.positional) M2_RETURN_IF_ERROR(check_expr(a.get(), soft));
      for (const auto& k : t->args.keywords) M2_RETURN_IF_ERROR(check_expr(k.value.get(), soft));
      return {};
    }
    case ExprKind::kCondExpr: {
      auto* c = static_cast<const CondExpr*>(e);
      M2_RETURN_IF_ERROR(check_expr(c->test.get(), true));
      M2_RETURN_IF_ERROR(check_expr(c->then_expr.get(), true));
      return check_expr(c->else_expr.get(), true);
    }
    case ExprKind::kGetattr:
      return check_expr(static_cast<const Getattr*>(e)->object.get(), soft);
    case ExprKind::kGetitem: {
      auto* g = static_cast<const Getitem*>(e);
      M2_RETURN_IF_ERROR(check_expr(g->object.get(), soft));
      return check_expr(g->index.get(), soft);
    }
    case ExprKind::kSlice: {
      auto* s = static_cast<const ast::Slice*>(e);
      M2_RETURN_IF_ERROR(check_expr(s->start.get(), soft));
      M2_RETURN_IF_ERROR(check_expr(s->stop.get(), soft));
      return check_expr(s->step.get(), soft);
    }
    case ExprKind::kCall: {
      auto* c = static_cast<const Call*>(e);
      M2_RETURN_IF_ERROR(check_expr(c->callee.get(), soft));
      for (const auto& a : c->args.positional) M2_RETURN_IF_ERROR(check_expr(a.get(), soft));
      for (const auto& k : c->args.keywords) M2_RETURN_IF_ERROR(check_expr(k.value.get(), soft));
      M2_RETURN_IF_ERROR(check_expr(c->args.dyn_args.get(), soft));
      return check_expr(c->args.dyn_kwargs.get(), soft);
    }
    case ExprKind::kNot:
    case ExprKind::kNeg:
    case ExprKind::kPos:
      return check_expr(static_cast<const Unary*>(e)->operand.get(), soft);
    case ExprKind::kBinary:
    case ExprKind::kAnd:
    case ExprKind::kOr: {
      auto* b = static_cast<const Binary*>(e);
      M2_RETURN_IF_ERROR(check_expr(b->left.get(), soft));
      return check_expr(b->right.get(), soft);
    }
    case ExprKind::kConcat:
      for (const auto& p : static_cast<const Concat*>(e)->parts) M2_RETURN_IF_ERROR(check_expr(p.get(), soft));
      return {};
    case ExprKind::kCompare: {
      auto* c = static_cast<const Compare*>(e);
      M2_RETURN_IF_ERROR(check_expr(c->first.get(), soft));
      for (const auto& [op, x] : c->rest) M2_RETURN_IF_ERROR(check_expr(x.get(), soft));
      return {};
    }
    case ExprKind::kList:
    case ExprKind::kTuple:
      for (const auto& i : static_cast<const Sequence*>(e)->items) M2_RETURN_IF_ERROR(check_expr(i.get(), soft));
      return {};
    case ExprKind::kDict:
      for (const auto& [k, v] : static_cast<const DictExpr*>(e)->items) {
        M2_RETURN_IF_ERROR(check_expr(k.get(), soft));
        M2_RETURN_IF_ERROR(check_expr(v.get(), soft));
      }
      return {};
    case ExprKind::kConst:
    case ExprKind::kName:
      return {};
  }
  return {};
}

Status Parser::check_names(const Body& body, bool soft) const {
  for (const auto& s : body) {
    switch (s->kind) {
      case StmtKind::kOutput:
        for (const auto& p : static_cast<const Output*>(s.get())->parts)
          M2_RETURN_IF_ERROR(check_expr(p.expr.get(), soft));
        break;
      case StmtKind::kIf: {
        auto* n = static_cast<const If*>(s.get());
        for (const auto& [test, b] : n->branches) {
          M2_RETURN_IF_ERROR(check_expr(test.get(), true));
          M2_RETURN_IF_ERROR(check_names(b, true));
        }
        M2_RETURN_IF_ERROR(check_names(n->else_body, true));
        break;
      }
      case StmtKind::kFor: {
        auto* n = static_cast<const For*>(s.get());
        M2_RETURN_IF_ERROR(check_expr(n->iter.get(), soft));
        M2_RETURN_IF_ERROR(check_expr(n->filter.get(), false));
        M2_RETURN_IF_ERROR(check_names(n->body, false));
        M2_RETURN_IF_ERROR(check_names(n->else_body, false));
        break;
      }
      case StmtKind::kSet:
        M2_RETURN_IF_ERROR(check_expr(static_cast<const Set*>(s.get())->value.get(), soft));
        break;
      case StmtKind::kSetBlock: {
        auto* n = static_cast<const SetBlock*>(s.get());
        M2_RETURN_IF_ERROR(check_expr(n->filter.get(), false));
        M2_RETURN_IF_ERROR(check_names(n->body, false));
        break;
      }
      case StmtKind::kMacro: {
        auto* n = static_cast<const Macro*>(s.get());
        for (const auto& d : n->defaults) M2_RETURN_IF_ERROR(check_expr(d.get(), false));
        M2_RETURN_IF_ERROR(check_names(n->body, false));
        break;
      }
      case StmtKind::kFilterBlock: {
        auto* n = static_cast<const FilterBlock*>(s.get());
        M2_RETURN_IF_ERROR(check_expr(n->filter.get(), false));
        M2_RETURN_IF_ERROR(check_names(n->body, false));
        break;
      }
      case StmtKind::kWith: {
        auto* n = static_cast<const With*>(s.get());
        for (const auto& v : n->values) M2_RETURN_IF_ERROR(check_expr(v.get(), soft));
        M2_RETURN_IF_ERROR(check_names(n->body, false));
        break;
      }
      case StmtKind::kScope:
        M2_RETURN_IF_ERROR(check_names(static_cast<const Scope*>(s.get())->body, false));
        break;
      case StmtKind::kBreak:
      case StmtKind::kContinue:
        break;
    }
  }
  return {};
}

}  // namespace m2::text::jinja
