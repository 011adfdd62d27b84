#include "text/jinja/parser.h"

#include <fmt/format.h>

#include <algorithm>

#include "text/jinja/builtins.h"
#include "text/jinja/parser_impl.h"

namespace m2::text::jinja {

using namespace ast;

// ---- token stream helpers ---------------------------------------------------

bool Parser::skip_name(const char* name) {
  if (!at_name(name)) return false;
  next();
  return true;
}

bool Parser::skip_op(Op op) {
  if (!at_op(op)) return false;
  next();
  return true;
}

std::string Parser::describe(const Token& t) {
  switch (t.type) {
    case Tok::kName:
      return t.text;
    case Tok::kData:
      return "template data / text";
    case Tok::kVariableBegin:
      return "begin of print statement";
    case Tok::kVariableEnd:
      return "end of print statement";
    case Tok::kBlockBegin:
      return "begin of statement block";
    case Tok::kBlockEnd:
      return "end of statement block";
    case Tok::kString:
      return "string";
    case Tok::kInteger:
      return "integer";
    case Tok::kFloat:
      return "float";
    case Tok::kOperator:
      return op_text(t.op);
    case Tok::kEof:
      return "end of template";
  }
  return "token";
}

Status Parser::fail(const Token& at, std::string_view message) const { return error_at(at.line, at.column, message); }

Status Parser::expect_op(Op op) {
  if (skip_op(op)) return {};
  if (cur().type == Tok::kEof)
    return fail(cur(), fmt::format("unexpected end of template, expected '{}'.", op_text(op)));
  return fail(cur(), fmt::format("expected token '{}', got '{}'", op_text(op), describe(cur())));
}

Status Parser::expect(Tok type) {
  if (cur().type == type) {
    next();
    return {};
  }
  Token want;
  want.type = type;
  if (cur().type == Tok::kEof) {
    return fail(cur(), fmt::format("unexpected end of template, expected '{}'.", describe(want)));
  }
  return fail(cur(), fmt::format("expected token '{}', got '{}'", describe(want), describe(cur())));
}

Status Parser::expect_name(const char* name) {
  if (skip_name(name)) return {};
  if (cur().type == Tok::kEof) return fail(cur(), fmt::format("unexpected end of template, expected '{}'.", name));
  return fail(cur(), fmt::format("expected token '{}', got '{}'", name, describe(cur())));
}

Result<std::string> Parser::expect_any_name() {
  if (cur().type != Tok::kName) {
    return fail(cur(), fmt::format("expected token 'name', got '{}'", describe(cur())));
  }
  std::string name = cur().text;
  next();
  return name;
}

int Parser::intern(const std::string& name) {
  auto [it, inserted] = slots_.try_emplace(name, int(names_.size()));
  if (inserted) names_.push_back(name);
  return it->second;
}

// ---- template body ----------------------------------------------------------

Result<Program> Parser::parse() {
  M2_ASSIGN_OR_RETURN(Body body, subparse({}));
  M2_RETURN_IF_ERROR(check_names(body, false));
  Program program;
  program.body = std::move(body);
  auto loop = slots_.find("loop");
  program.loop_slot = loop == slots_.end() ? -1 : loop->second;
  program.symbols = std::move(names_);
  return program;
}

Status Parser::fail_eof(const std::vector<const char*>& end_tokens) const {
  std::string message = "unexpected end of template.";
  if (!end_tokens.empty()) {
    std::vector<std::string> quoted;
    for (const char* t : end_tokens) quoted.push_back(fmt::format("'{}'", t));
    message += fmt::format(" Jinja was looking for the following tags: {}.", fmt::join(quoted, " or "));
  }
  if (!open_tags_.empty()) {
    message += fmt::format(" The innermost block that needs to be closed is '{}' (opened at line {}).",
                           open_tags_.back().name, open_tags_.back().line);
  }
  return fail(cur(), message);
}

Result<Body> Parser::subparse(const std::vector<const char*>& end_tokens) {
  if (++depth_ > kMaxParseDepth) return fail(cur(), "template blocks nested too deeply");
  if (!end_tokens.empty()) end_stack_.push_back(end_tokens);
  Body body;
  std::unique_ptr<Output> output;
  auto flush = [&] {
    if (output) body.push_back(std::move(output));
  };
  auto out = [&]() -> Output& {
    if (!output) output = std::make_unique<Output>();
    if (output->parts.empty()) place(output.get(), cur());
    return *output;
  };
  while (cur().type != Tok::kEof) {
    const Token& t = cur();
    if (t.type == Tok::kData) {
      out().parts.push_back({t.text, nullptr});
      next();
    } else if (t.type == Tok::kVariableBegin) {
      next();
      Output& o = out();
      M2_ASSIGN_OR_RETURN(ExprPtr e, parse_tuple(true, {}, false));
      o.parts.push_back({std::string(), std::move(e)});
      M2_RETURN_IF_ERROR(expect(Tok::kVariableEnd));
    } else if (t.type == Tok::kBlockBegin) {
      flush();
      next();
      if (cur().type == Tok::kName &&
          std::any_of(end_tokens.begin(), end_tokens.end(), [&](const char* e) { return cur().text == e; })) {
        --depth_;
        if (!end_tokens.empty()) end_stack_.pop_back();
        return body;
      }
      M2_RETURN_IF_ERROR(parse_statement(&body));
      M2_RETURN_IF_ERROR(expect(Tok::kBlockEnd));
    } else {
      return fail(t, fmt::format("unexpected '{}'", describe(t)));
    }
  }
  flush();
  --depth_;
  if (!end_tokens.empty()) end_stack_.pop_back();
  return body;
}

Result<Body> Parser::parse_statements(const std::vector<const char*>& end_tokens, bool drop_needle) {
  skip_op(Op::kColon);
  M2_RETURN_IF_ERROR(expect(Tok::kBlockEnd));
  M2_ASSIGN_OR_RETURN(Body body, subparse(end_tokens));
  if (cur().type == Tok::kEof) return fail_eof(end_tokens);
  if (drop_needle) next();
  return body;
}

Status Parser::parse_statement(Body* out) {
  const Token& t = cur();
  if (t.type != Tok::kName) return fail(t, "tag name expected");
  const std::string tag = t.text;
  if (tag == "block" || tag == "extends" || tag == "include" || tag == "import" || tag == "from" || tag == "call" ||
      tag == "autoescape") {
    return fail(t, fmt::format("the '{}' tag is not supported by m2cpp's chat-template interpreter", tag));
  }
  if (tag == "break" || tag == "continue") {
    if (loop_depth_ == 0) return fail(t, fmt::format("'{}' outside loop", tag));
    auto node = std::make_unique<LoopControl>(tag == "break" ? StmtKind::kBreak : StmtKind::kContinue);
    place(node.get(), t);
    next();
    out->push_back(std::move(node));
    return {};
  }
  using ParseFn = Result<StmtPtr> (Parser::*)();
  static const std::pair<const char*, ParseFn> kTags[] = {
      {"for", &Parser::parse_for},
      {"if", &Parser::parse_if},
      {"set", &Parser::parse_set},
      {"macro", &Parser::parse_macro},
      {"filter", &Parser::parse_filter_block},
      {"with", &Parser::parse_with},
      {"print", &Parser::parse_print},
      {"generation", &Parser::parse_generation},
  };
  for (const auto& [name, fn] : kTags) {
    if (tag != name) continue;
    open_tags_.push_back({tag, t.line});
    M2_ASSIGN_OR_RETURN(StmtPtr stmt, (this->*fn)());
    open_tags_.pop_back();
    out->push_back(std::move(stmt));
    return {};
  }
  std::string message = fmt::format("Encountered unknown tag '{}'.", tag);
  const bool expected_somewhere = std::any_of(end_stack_.begin(), end_stack_.end(), [&](const auto& ends) {
    return std::any_of(ends.begin(), ends.end(), [&](const char* e) { return tag == e; });
  });
  if (expected_somewhere) {
    std::vector<std::string> quoted;
    for (const char* e : end_stack_.back()) quoted.push_back(fmt::format("'{}'", e));
    message +=
        fmt::format(" You probably made a nesting mistake. Jinja is expecting this tag, but currently looking for {}.",
                    fmt::join(quoted, " or "));
  }
  if (!open_tags_.empty()) {
    message += fmt::format(" The innermost block that needs to be closed is '{}' (opened at line {}).",
                           open_tags_.back().name, open_tags_.back().line);
  }
  return fail(t, message);
}

// transformers' AssistantTracker extension: {% generation %} renders its body.
Result<StmtPtr> Parser::parse_generation() {
  auto node = std::make_unique<Scope>();
  place(node.get(), cur());
  next();
  M2_ASSIGN_OR_RETURN(node->body, parse_statements({"endgeneration"}, true));
  return StmtPtr(std::move(node));
}

Result<StmtPtr> Parser::parse_for() {
  auto node = std::make_unique<For>();
  place(node.get(), cur());
  next();
  M2_ASSIGN_OR_RETURN(node->target, parse_assign_target(true, false, {"in"}, false));
  M2_RETURN_IF_ERROR(expect_name("in"));
  M2_ASSIGN_OR_RETURN(node->iter, parse_tuple(false, {"recursive"}, false));
  if (skip_name("if")) {
    M2_ASSIGN_OR_RETURN(node->filter, parse_expression());
  }
  if (at_name("recursive"))
    return fail(cur(), "recursive for loops are not supported by m2cpp's chat-template interpreter");
  ++loop_depth_;
  M2_ASSIGN_OR_RETURN(node->body, parse_statements({"endfor", "else"}, false));
  --loop_depth_;
  const bool has_else = at_name("else");
  next();
  if (has_else) {
    M2_ASSIGN_OR_RETURN(node->else_body, parse_statements({"endfor"}, true));
  }
  return StmtPtr(std::move(node));
}

Result<StmtPtr> Parser::parse_if() {
  auto node = std::make_unique<If>();
  place(node.get(), cur());
  next();
  while (true) {
    M2_ASSIGN_OR_RETURN(ExprPtr test, parse_tuple(false, {}, false));
    M2_ASSIGN_OR_RETURN(Body body, parse_statements({"elif", "else", "endif"}, false));
    node->branches.emplace_back(std::move(test), std::move(body));
    const std::string which = cur().text;
    next();
    if (which == "elif") continue;
    if (which == "else") {
      M2_ASSIGN_OR_RETURN(node->else_body, parse_statements({"endif"}, true));
    }
    break;
  }
  return StmtPtr(std::move(node));
}

Result<StmtPtr> Parser::parse_set() {
  const Token start = cur();
  next();
  M2_ASSIGN_OR_RETURN(Target target, parse_assign_target(true, false, {}, true));
  if (skip_op(Op::kAssign)) {
    auto node = std::make_unique<Set>();
    place(node.get(), start);
    node->target = std::move(target);
    M2_ASSIGN_OR_RETURN(node->value, parse_tuple(true, {}, false));
    return StmtPtr(std::move(node));
  }
  auto node = std::make_unique<SetBlock>();
  place(node.get(), start);
  node->target = std::move(target);
  if (at_op(Op::kPipe)) {
    M2_ASSIGN_OR_RETURN(node->filter, parse_filter(nullptr, false));
  }
  M2_ASSIGN_OR_RETURN(node->body, parse_statements({"endset"}, true));
  return StmtPtr(std::move(node));
}

Result<StmtPtr> Parser::parse_macro() {
  auto node = std::make_unique<Macro>();
  place(node.get(), cur());
  next();
  M2_ASSIGN_OR_RETURN(Target name, parse_assign_target(false, true, {}, false));
  node->name = name.name;
  node->slot = name.slot;
  M2_RETURN_IF_ERROR(expect_op(Op::kLParen));
  while (!at_op(Op::kRParen)) {
    if (!node->params.empty()) M2_RETURN_IF_ERROR(expect_op(Op::kComma));
    M2_ASSIGN_OR_RETURN(Target arg, parse_assign_target(false, true, {}, false));
    if (skip_op(Op::kAssign)) {
      M2_ASSIGN_OR_RETURN(ExprPtr def, parse_expression());
      node->defaults.push_back(std::move(def));
    } else if (!node->defaults.empty()) {
      return fail(cur(), "non-default argument follows default argument");
    }
    node->params.push_back(arg.name);
    node->param_slots.push_back(arg.slot);
  }
  M2_RETURN_IF_ERROR(expect_op(Op::kRParen));
  // A macro body is its own function: loop controls do not reach outside.
  const int saved_loop_depth = loop_depth_;
  loop_depth_ = 0;
  macros_.push_back(node.get());
  auto body = parse_statements({"endmacro"}, true);
  macros_.pop_back();
  loop_depth_ = saved_loop_depth;
  if (!body.ok()) return body.status();
  node->body = std::move(body).value();
  node->varargs_slot = intern("varargs");
  node->kwargs_slot = intern("kwargs");
  return StmtPtr(std::move(node));
}

Result<StmtPtr> Parser::parse_filter_block() {
  auto node = std::make_unique<FilterBlock>();
  place(node.get(), cur());
  next();
  M2_ASSIGN_OR_RETURN(node->filter, parse_filter(nullptr, true));
  M2_ASSIGN_OR_RETURN(node->body, parse_statements({"endfilter"}, true));
  return StmtPtr(std::move(node));
}

Result<StmtPtr> Parser::parse_with() {
  auto node = std::make_unique<With>();
  place(node.get(), cur());
  next();
  while (cur().type != Tok::kBlockEnd) {
    if (!node->targets.empty()) M2_RETURN_IF_ERROR(expect_op(Op::kComma));
    M2_ASSIGN_OR_RETURN(Target target, parse_assign_target(true, false, {}, false));
    M2_RETURN_IF_ERROR(expect_op(Op::kAssign));
    M2_ASSIGN_OR_RETURN(ExprPtr value, parse_expression());
    node->targets.push_back(std::move(target));
    node->values.push_back(std::move(value));
    if (cur().type == Tok::kEof) return fail_eof({});
  }
  M2_ASSIGN_OR_RETURN(node->body, parse_statements({"endwith"}, true));
  return StmtPtr(std::move(node));
}

Result<StmtPtr> Parser::parse_print() {
  auto node = std::make_unique<Output>();
  place(node.get(), cur());
  next();
  while (cur().type != Tok::kBlockEnd) {
    if (!node->parts.empty()) M2_RETURN_IF_ERROR(expect_op(Op::kComma));
    M2_ASSIGN_OR_RETURN(ExprPtr e, parse_expression());
    node->parts.push_back({std::string(), std::move(e)});
    if (cur().type == Tok::kEof) return fail_eof({});
  }
  return StmtPtr(std::move(node));
}

// ---- assignment targets -----------------------------------------------------

Result<Target> Parser::parse_target_primary(bool with_namespace) {
  const Token& t = cur();
  Target target;
  target.line = t.line;
  target.column = t.column;
  if (t.type == Tok::kName) {
    static const char* const kConstants[] = {"true", "false", "True", "False", "none", "None"};
    if (std::any_of(std::begin(kConstants), std::end(kConstants), [&](const char* c) { return t.text == c; })) {
      return fail(t, "can't assign to 'const'");
    }
    target.name = t.text;
    target.slot = intern(t.text);
    next();
    if (with_namespace && at_op(Op::kDot)) {
      next();
      M2_ASSIGN_OR_RETURN(target.attr, expect_any_name());
      target.kind = Target::Kind::kNamespaceAttr;
    }
    return target;
  }
  if (t.type == Tok::kString || t.type == Tok::kInteger || t.type == Tok::kFloat) {
    return fail(t, "can't assign to 'const'");
  }
  if (t.type == Tok::kOperator && t.op == Op::kLParen) {
    next();
    M2_ASSIGN_OR_RETURN(target, parse_assign_target(true, false, {}, with_namespace));
    M2_RETURN_IF_ERROR(expect_op(Op::kRParen));
    return target;
  }
  if (t.type == Tok::kOperator && (t.op == Op::kLBracket || t.op == Op::kLBrace)) {
    return fail(t, fmt::format("can't assign to '{}'", t.op == Op::kLBracket ? "list" : "dict"));
  }
  return fail(t, fmt::format("unexpected '{}'", describe(t)));
}

Result<Target> Parser::parse_assign_target(bool with_tuple, bool name_only, const std::vector<const char*>& extra_end,
                                           bool with_namespace) {
  if (name_only) {
    const Token t = cur();
    M2_ASSIGN_OR_RETURN(std::string name, expect_any_name());
    Target target;
    target.line = t.line;
    target.column = t.column;
    target.name = name;
    target.slot = intern(name);
    return target;
  }
  if (!with_tuple) return parse_target_primary(with_namespace);
  Target tuple;
  tuple.kind = Target::Kind::kTuple;
  tuple.line = cur().line;
  tuple.column = cur().column;
  bool is_tuple = false;
  while (true) {
    if (!tuple.items.empty()) M2_RETURN_IF_ERROR(expect_op(Op::kComma));
    if (is_tuple_end(extra_end)) break;
    M2_ASSIGN_OR_RETURN(Target item, parse_target_primary(with_namespace));
    tuple.items.push_back(std::move(item));
    if (at_op(Op::kComma)) {
      is_tuple = true;
    } else {
      break;
    }
  }
  if (!is_tuple) {
    if (!tuple.items.empty()) return std::move(tuple.items[0]);
    return fail(cur(), fmt::format("Expected an expression, got '{}'", describe(cur())));
  }
  for (const Target& t : tuple.items) {
    if (t.kind == Target::Kind::kNamespaceAttr) return fail(cur(), "can't assign to a namespace attribute in a tuple");
  }
  return tuple;
}

Result<Program> parse_template(std::string_view source, const LexerOptions& options) {
  M2_ASSIGN_OR_RETURN(std::vector<Token> tokens, tokenize(source, options));
  Parser parser(std::move(tokens));
  return parser.parse();
}

}  // namespace m2::text::jinja
