// Jinja2 parser: tokens to a Program (syntax tree), following
// jinja2/parser.py production by production so that precedence and the
// quirks (optional `else` in inline ifs, test arguments without parentheses,
// implicit string concatenation, tuples without parentheses) match.
//
// Supported statements: if/elif/else, for (with `if` filter and `else`), set
// (plain, tuple, namespace attribute, block form with filters), macro,
// filter blocks, with, print, break/continue (loopcontrols), raw, comments,
// and transformers' {% generation %}. include/extends/import/block/call are
// refused with a message naming the line.
#pragma once

#include <string_view>

#include "text/jinja/ast.h"
#include "text/jinja/lexer.h"
#include "util/status.h"

namespace m2::text::jinja {

// Errors read "line L, column C: message".
Result<Program> parse_template(std::string_view source, const LexerOptions& options);

}  // namespace m2::text::jinja
