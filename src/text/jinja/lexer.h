// Jinja2 lexer: splits template source into text and tag tokens exactly as
// jinja2.lexer.Lexer does, including its whitespace control (`-`/`+` tag
// modifiers, trim_blocks, lstrip_blocks), newline normalisation, removal of
// one trailing newline, raw blocks, comments, and Python literal syntax inside
// tags (string escapes via 'unicode-escape', `_` digit separators, 0x/0o/0b).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "util/status.h"

namespace m2::text::jinja {

enum class Tok : uint8_t {
  kData,           // template text (whitespace control already applied)
  kVariableBegin,  // {{
  kVariableEnd,    // }}
  kBlockBegin,     // {%
  kBlockEnd,       // %}
  kName,
  kString,
  kInteger,
  kFloat,
  kOperator,
  kEof,
};

enum class Op : uint8_t {
  kAdd,
  kSub,
  kDiv,
  kFloorDiv,
  kMul,
  kMod,
  kPow,
  kTilde,
  kLBracket,
  kRBracket,
  kLParen,
  kRParen,
  kLBrace,
  kRBrace,
  kEq,
  kNe,
  kGt,
  kGe,
  kLt,
  kLe,
  kAssign,
  kDot,
  kColon,
  kPipe,
  kComma,
  kSemicolon,
};

const char* op_text(Op op);

struct Token {
  Tok type = Tok::kEof;
  Op op = Op::kAdd;  // kOperator only
  int line = 1;      // 1-based, in the newline-normalised source
  int column = 1;    // 1-based, in code points
  std::string text;  // kData, kName, kString (decoded)
  int64_t int_value = 0;
  double float_value = 0;
};

struct LexerOptions {
  // Hugging Face's chat-template environment.
  bool trim_blocks = true;
  bool lstrip_blocks = true;
  bool keep_trailing_newline = false;
};

// Errors read "line L, column C: message".
Result<std::vector<Token>> tokenize(std::string_view source, const LexerOptions& options);

// "line L, column C: message" (the form every template error takes).
Status error_at(int line, int column, std::string_view message);

}  // namespace m2::text::jinja
