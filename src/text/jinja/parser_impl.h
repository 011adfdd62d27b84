// The parser's state, shared by parser.cpp (statements) and
// parser_expr.cpp (expressions). Internal to the interpreter.
#pragma once

#include <string>
#include <unordered_map>
#include <vector>

#include "text/jinja/ast.h"
#include "text/jinja/lexer.h"
#include "util/status.h"

namespace m2::text::jinja {

class Parser {
 public:
  explicit Parser(std::vector<Token> tokens) : toks_(std::move(tokens)) {}
  Result<Program> parse();

 private:
  // ---- token stream
  const Token& cur() const { return toks_[pos_]; }
  const Token& look() const { return toks_[pos_ + 1 < toks_.size() ? pos_ + 1 : pos_]; }
  void next() {
    if (pos_ + 1 < toks_.size()) ++pos_;
  }
  bool at_name(const char* name) const { return cur().type == Tok::kName && cur().text == name; }
  bool at_op(Op op) const { return cur().type == Tok::kOperator && cur().op == op; }
  bool skip_name(const char* name);
  bool skip_op(Op op);
  Status expect_op(Op op);
  Status expect(Tok type);
  Status expect_name(const char* name);
  Result<std::string> expect_any_name();
  Status fail(const Token& at, std::string_view message) const;
  static std::string describe(const Token& t);
  int intern(const std::string& name);
  template <typename T>
  T* place(T* node, const Token& at) const {
    node->line = at.line;
    node->column = at.column;
    return node;
  }

  // ---- statements (parser.cpp)
  Result<ast::Body> subparse(const std::vector<const char*>& end_tokens);
  Result<ast::Body> parse_statements(const std::vector<const char*>& end_tokens, bool drop_needle);
  Status parse_statement(ast::Body* out);
  Result<ast::StmtPtr> parse_for();
  Result<ast::StmtPtr> parse_if();
  Result<ast::StmtPtr> parse_set();
  Result<ast::StmtPtr> parse_macro();
  Result<ast::StmtPtr> parse_filter_block();
  Result<ast::StmtPtr> parse_with();
  Result<ast::StmtPtr> parse_print();
  Result<ast::StmtPtr> parse_generation();
  Result<ast::Target> parse_assign_target(bool with_tuple, bool name_only, const std::vector<const char*>& extra_end,
                                          bool with_namespace);
  Result<ast::Target> parse_target_primary(bool with_namespace);
  Status fail_eof(const std::vector<const char*>& end_tokens) const;

  // ---- expressions (parser_expr.cpp)
  Result<ast::ExprPtr> parse_expression(bool with_condexpr = true);
  Result<ast::ExprPtr> parse_condexpr();
  Result<ast::ExprPtr> parse_or();
  Result<ast::ExprPtr> parse_and();
  Result<ast::ExprPtr> parse_not();
  Result<ast::ExprPtr> parse_compare();
  Result<ast::ExprPtr> parse_math1();
  Result<ast::ExprPtr> parse_concat();
  Result<ast::ExprPtr> parse_math2();
  Result<ast::ExprPtr> parse_pow();
  Result<ast::ExprPtr> parse_unary(bool with_filter);
  Result<ast::ExprPtr> parse_primary();
  Result<ast::ExprPtr> parse_tuple(bool with_condexpr, const std::vector<const char*>& extra_end,
                                   bool explicit_parentheses);
  Result<ast::ExprPtr> parse_list();
  Result<ast::ExprPtr> parse_dict();
  Result<ast::ExprPtr> parse_postfix(ast::ExprPtr node);
  Result<ast::ExprPtr> parse_filter_expr(ast::ExprPtr node);
  Result<ast::ExprPtr> parse_subscript(ast::ExprPtr node);
  Result<ast::ExprPtr> parse_subscribed();
  Status parse_call_args(ast::Args* args);
  Result<ast::ExprPtr> parse_call(ast::ExprPtr node);
  Result<ast::ExprPtr> parse_filter(ast::ExprPtr node, bool start_inline);
  Result<ast::ExprPtr> parse_test(ast::ExprPtr node);
  bool is_tuple_end(const std::vector<const char*>& extra_end) const;

  // ---- checks after parsing (parser.cpp)
  Status check_names(const ast::Body& body, bool soft) const;
  Status check_expr(const ast::Expr* e, bool soft) const;

  std::vector<Token> toks_;
  size_t pos_ = 0;
  std::unordered_map<std::string, int> slots_;
  std::vector<std::string> names_;
  int depth_ = 0;       // nesting guard against stack exhaustion
  int loop_depth_ = 0;  // for break/continue (reset inside macros)
  struct OpenTag {
    std::string name;
    int line;
  };
  std::vector<OpenTag> open_tags_;                   // for "missing {% endfor %}" messages
  std::vector<std::vector<const char*>> end_stack_;  // end tags the open blocks wait for
  std::vector<ast::Macro*> macros_;                  // innermost macro being parsed
};

// Nesting depth (brackets, unary chains, nested blocks) beyond which the
// parser refuses a template instead of recursing further.
inline constexpr int kMaxParseDepth = 200;

}  // namespace m2::text::jinja
