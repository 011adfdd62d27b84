#include "text/jinja/template.h"

#include <algorithm>

#include "text/jinja/builtins.h"
#include "text/jinja/callable.h"
#include "text/jinja/interpreter.h"
#include "text/jinja/parser.h"

namespace m2::text::jinja {

Result<Template> Template::parse(std::string_view source, std::string name, const LexerOptions& options) {
  auto program = parse_template(source, options);
  if (!program.ok()) return program.status().with_context(name);
  Template t;
  t.name_ = std::move(name);
  auto globals = std::make_shared<std::vector<Value>>(program->symbols.size());
  for (size_t slot = 0; slot < program->symbols.size(); ++slot) {
    const std::string& symbol = program->symbols[slot];
    if (GlobalFn fn = find_global(symbol)) {
      auto c = std::make_shared<Callable>();
      c->type = Callable::Type::kGlobal;
      c->name = symbol;
      c->global = fn;
      (*globals)[slot] = Value::callable(std::move(c));
    }
  }
  t.globals_ = std::move(globals);
  t.program_ = std::make_shared<const Program>(std::move(program).value());
  return t;
}

namespace {

bool is_attribute_access(const ast::Expr& e, std::string_view attr) {
  if (e.kind == ast::ExprKind::kGetattr) return static_cast<const ast::Getattr&>(e).attr == attr;
  if (e.kind != ast::ExprKind::kGetitem) return false;
  const auto& index = *static_cast<const ast::Getitem&>(e).index;
  if (index.kind != ast::ExprKind::kConst) return false;
  const Value& v = static_cast<const ast::Const&>(index).value;
  return v.is_string() && v.as_string() == attr;
}

bool body_loops_over(const ast::Body& body, std::string_view attr) {
  using ast::StmtKind;
  for (const auto& s : body) {
    switch (s->kind) {
      case StmtKind::kFor: {
        const auto& f = static_cast<const ast::For&>(*s);
        if (is_attribute_access(*f.iter, attr) || body_loops_over(f.body, attr) || body_loops_over(f.else_body, attr)) {
          return true;
        }
        break;
      }
      case StmtKind::kIf: {
        const auto& i = static_cast<const ast::If&>(*s);
        for (const auto& [test, b] : i.branches) {
          if (body_loops_over(b, attr)) return true;
        }
        if (body_loops_over(i.else_body, attr)) return true;
        break;
      }
      case StmtKind::kMacro:
        if (body_loops_over(static_cast<const ast::Macro&>(*s).body, attr)) return true;
        break;
      case StmtKind::kSetBlock:
        if (body_loops_over(static_cast<const ast::SetBlock&>(*s).body, attr)) return true;
        break;
      case StmtKind::kFilterBlock:
        if (body_loops_over(static_cast<const ast::FilterBlock&>(*s).body, attr)) return true;
        break;
      case StmtKind::kWith:
        if (body_loops_over(static_cast<const ast::With&>(*s).body, attr)) return true;
        break;
      case StmtKind::kScope:
        if (body_loops_over(static_cast<const ast::Scope&>(*s).body, attr)) return true;
        break;
      default:
        break;
    }
  }
  return false;
}

}  // namespace

bool Template::loops_over_attribute(std::string_view attr) const { return body_loops_over(program_->body, attr); }

Result<std::string> Template::render(const std::vector<std::pair<std::string, Value>>& vars) const {
  auto root = std::make_shared<Frame>();
  const auto& symbols = program_->symbols;
  for (const auto& [name, value] : vars) {
    // A variable the template never names cannot influence the output.
    auto it = std::find(symbols.begin(), symbols.end(), name);
    if (it != symbols.end()) root->set(int(it - symbols.begin()), value);
  }
  Interpreter interpreter(*program_, *globals_);
  std::string out;
  Status s = interpreter.render(root, &out);
  if (!s.ok()) return s.with_context(name_);
  return out;
}

}  // namespace m2::text::jinja
