#include "text/jinja/lexer.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <limits>

#include "text/jinja/unicode.h"

namespace m2::text::jinja {

const char* op_text(Op op) {
  static const char* const kText[] = {"+", "-",  "/",  "//", "*",  "%", "**", "~", "[", "]", "(", ")", "{",
                                      "}", "==", "!=", ">",  ">=", "<", "<=", "=", ".", ":", "|", ",", ";"};
  return kText[static_cast<int>(op)];
}

Status error_at(int line, int column, std::string_view message) {
  if (column > 0) return errorf("line {}, column {}: {}", line, column, message);
  return errorf("line {}: {}", line, message);
}

namespace {

bool is_digit(char c) { return c >= '0' && c <= '9'; }

// Python's str.isspace() at s[pos]; *len receives the byte length.
bool space_at(std::string_view s, size_t pos, size_t* len) {
  size_t p = pos;
  char32_t cp = next_code_point(s, &p);
  *len = p - pos;
  return is_py_space(cp);
}

size_t skip_spaces(std::string_view s, size_t pos) {
  size_t len = 0;
  while (pos < s.size() && space_at(s, pos, &len)) pos += len;
  return pos;
}

// Matches `(\d+_)*\d+` at pos; returns the end, or pos when no digit.
size_t scan_digit_groups(std::string_view s, size_t pos) {
  if (pos >= s.size() || !is_digit(s[pos])) return pos;
  size_t p = pos;
  while (true) {
    while (p < s.size() && is_digit(s[p])) ++p;
    if (p + 1 < s.size() && s[p] == '_' && is_digit(s[p + 1])) {
      ++p;
      continue;
    }
    return p;
  }
}

// Python's "unicode-escape" codec on an ASCII string (what jinja applies to
// string literals after encoding them with 'backslashreplace').
Result<std::string> decode_unicode_escape(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  auto hex = [&](size_t at, int n, char32_t* cp) {
    if (at + size_t(n) > s.size()) return false;
    uint32_t v = 0;
    for (int i = 0; i < n; ++i) {
      char c = s[at + size_t(i)];
      int d = is_digit(c)              ? c - '0'
              : (c >= 'a' && c <= 'f') ? c - 'a' + 10
              : (c >= 'A' && c <= 'F') ? c - 'A' + 10
                                       : -1;
      if (d < 0) return false;
      v = v * 16 + uint32_t(d);
    }
    *cp = v;
    return true;
  };
  for (size_t i = 0; i < s.size(); ++i) {
    char c = s[i];
    if (c != '\\') {
      out.push_back(c);
      continue;
    }
    if (i + 1 >= s.size()) return errorf("\\ at end of string");
    char e = s[++i];
    char32_t cp = 0;
    switch (e) {
      case '\n':
        break;  // line continuation
      case '\\':
        out.push_back('\\');
        break;
      case '\'':
        out.push_back('\'');
        break;
      case '"':
        out.push_back('"');
        break;
      case 'a':
        out.push_back('\a');
        break;
      case 'b':
        out.push_back('\b');
        break;
      case 'f':
        out.push_back('\f');
        break;
      case 'n':
        out.push_back('\n');
        break;
      case 'r':
        out.push_back('\r');
        break;
      case 't':
        out.push_back('\t');
        break;
      case 'v':
        out.push_back('\v');
        break;
      case 'x':
      case 'u':
      case 'U': {
        const int n = e == 'x' ? 2 : e == 'u' ? 4 : 8;
        if (!hex(i + 1, n, &cp)) return errorf("truncated \\{}{} escape", e, std::string(size_t(n), 'X'));
        if (cp > 0x10FFFF) return errorf("illegal Unicode character");
        if (cp >= 0xD800 && cp <= 0xDFFF)
          return errorf("surrogate code point U+{:04X} in string literal", uint32_t(cp));
        append_utf8(&out, cp);
        i += size_t(n);
        break;
      }
      case 'N':
        return errorf("\\N{{...}} escapes are not supported");
      default:
        if (e >= '0' && e <= '7') {
          cp = char32_t(e - '0');
          for (int k = 0; k < 2 && i + 1 < s.size() && s[i + 1] >= '0' && s[i + 1] <= '7'; ++k) {
            cp = cp * 8 + char32_t(s[++i] - '0');
          }
          append_utf8(&out, cp);
        } else {
          out.push_back('\\');  // unknown escapes are kept verbatim
          out.push_back(e);
        }
    }
  }
  return out;
}

// Jinja's string literal decoding: non-ASCII characters become Python
// backslash escapes first, then the whole body goes through unicode-escape.
Result<std::string> decode_string_literal(std::string_view body) {
  std::string ascii;
  ascii.reserve(body.size());
  size_t pos = 0;
  while (pos < body.size()) {
    char32_t cp = next_code_point(body, &pos);
    if (cp < 0x80)
      ascii.push_back(char(cp));
    else if (cp <= 0xFF)
      ascii += fmt::format("\\x{:02x}", uint32_t(cp));
    else if (cp <= 0xFFFF)
      ascii += fmt::format("\\u{:04x}", uint32_t(cp));
    else
      ascii += fmt::format("\\U{:08x}", uint32_t(cp));
  }
  return decode_unicode_escape(ascii);
}

class Lexer {
 public:
  Lexer(std::string source, const LexerOptions& options) : src_(std::move(source)), opt_(options) {
    line_starts_.push_back(0);
    for (size_t i = 0; i < src_.size(); ++i) {
      if (src_[i] == '\n') line_starts_.push_back(i + 1);
    }
  }

  Result<std::vector<Token>> run() {
    size_t pos = 0;
    bool line_starting = true;  // did the previous match end with a newline?
    const std::string_view s = src_;
    while (pos < s.size()) {
      size_t tag = find_tag_start(pos);
      if (tag == std::string::npos) {
        push_data(pos, s.substr(pos));
        break;
      }
      const char kind = s[tag + 1];
      size_t after = tag + 2;
      char sign = 0;
      if (after < s.size() && (s[after] == '-' || s[after] == '+')) sign = s[after++];
      size_t raw_end = kind == '%' ? match_raw_begin(after) : std::string::npos;
      std::string_view text = s.substr(pos, tag - pos);
      text = apply_left_control(text, sign, kind != '{', line_starting);
      push_data(pos, text);
      if (raw_end != std::string::npos) {
        line_starting = s[raw_end - 1] == '\n';
        M2_ASSIGN_OR_RETURN(pos, lex_raw_body(tag, raw_end, line_starting));
        line_starting = pos > 0 && s[pos - 1] == '\n';
      } else if (kind == '#') {
        M2_ASSIGN_OR_RETURN(pos, skip_comment(tag, after));
        line_starting = s[pos - 1] == '\n';
      } else {
        push(kind == '%' ? Tok::kBlockBegin : Tok::kVariableBegin, tag);
        M2_ASSIGN_OR_RETURN(pos, lex_tag(after, kind == '%'));
        line_starting = s[pos - 1] == '\n';
      }
    }
    push(Tok::kEof, s.size());
    return std::move(tokens_);
  }

 private:
  std::pair<int, int> line_col(size_t pos) const {
    auto it = std::upper_bound(line_starts_.begin(), line_starts_.end(), pos);
    size_t line_start = *(it - 1);
    int col = 1 + int(code_point_count(std::string_view(src_).substr(line_start, pos - line_start)));
    return {int(it - line_starts_.begin()), col};
  }

  Status fail(size_t pos, std::string_view message) const {
    auto [line, col] = line_col(pos);
    return error_at(line, col, message);
  }

  Token& push(Tok type, size_t pos) {
    Token t;
    t.type = type;
    std::tie(t.line, t.column) = line_col(pos);
    tokens_.push_back(std::move(t));
    return tokens_.back();
  }

  void push_data(size_t pos, std::string_view text) {
    if (!text.empty()) push(Tok::kData, pos).text = std::string(text);
  }

  size_t find_tag_start(size_t pos) const {
    while (true) {
      size_t p = src_.find('{', pos);
      if (p == std::string::npos || p + 1 >= src_.size()) return std::string::npos;
      char c = src_[p + 1];
      if (c == '{' || c == '%' || c == '#') return p;
      pos = p + 1;
    }
  }

  // `\s*raw\s*(?:-%}\s*|%})` after "{%" and its sign; returns the end or npos.
  size_t match_raw_begin(size_t pos) const {
    std::string_view s = src_;
    size_t p = skip_spaces(s, pos);
    if (s.compare(p, 3, "raw") != 0) return std::string::npos;
    p = skip_spaces(s, p + 3);
    if (s.compare(p, 3, "-%}") == 0) return skip_spaces(s, p + 3);
    if (s.compare(p, 2, "%}") == 0) return p + 2;
    return std::string::npos;
  }

  // Whitespace control on the text before a tag: "-" strips all trailing
  // whitespace; otherwise lstrip_blocks removes the spaces between the last
  // line start and a block or comment tag.
  std::string_view apply_left_control(std::string_view text, char sign, bool lstrip_kind, bool line_starting) const {
    if (sign == '-') return py_strip(text, nullptr, false, true);
    if (sign == '+' || !opt_.lstrip_blocks || !lstrip_kind) return text;
    size_t l_pos = text.rfind('\n');
    l_pos = l_pos == std::string_view::npos ? 0 : l_pos + 1;
    if (l_pos == 0 && !line_starting) return text;
    std::string_view tail = text.substr(l_pos);
    if (tail.empty()) return text;
    size_t p = 0, len = 0;
    while (p < tail.size() && space_at(tail, p, &len)) p += len;
    return p == tail.size() ? text.substr(0, l_pos) : text;
  }

  // Matches the closing of a block at pos: "+%}", "-%}\s*" or "%}" (+ "\n"
  // with trim_blocks). Returns the end, or npos. Comments use '#'.
  size_t match_block_close(size_t pos, char mark) const {
    std::string_view s = src_;
    const char close[3] = {mark, '}', 0};
    if (s[pos] == '+' && s.compare(pos + 1, 2, close) == 0) return pos + 3;
    if (s[pos] == '-' && s.compare(pos + 1, 2, close) == 0) return skip_spaces(s, pos + 3);
    if (s.compare(pos, 2, close) == 0) {
      size_t end = pos + 2;
      if (opt_.trim_blocks && end < s.size() && s[end] == '\n') ++end;
      return end;
    }
    return std::string::npos;
  }

  Result<size_t> skip_comment(size_t tag, size_t pos) const {
    for (size_t p = pos; p < src_.size(); ++p) {
      if (src_[p] != '+' && src_[p] != '-' && src_[p] != '#') continue;
      size_t end = match_block_close(p, '#');
      if (end != std::string::npos) return end;
    }
    return fail(tag, "Missing end of comment tag");
  }

  Result<size_t> lex_raw_body(size_t tag, size_t body, bool line_starting) {
    std::string_view s = src_;
    for (size_t p = s.find("{%", body); p != std::string::npos; p = s.find("{%", p + 1)) {
      size_t q = p + 2;
      char sign = 0;
      if (q < s.size() && (s[q] == '-' || s[q] == '+')) sign = s[q++];
      q = skip_spaces(s, q);
      if (s.compare(q, 6, "endraw") != 0) continue;
      q = skip_spaces(s, q + 6);
      size_t end = q < s.size() ? match_block_close(q, '%') : std::string::npos;
      if (end == std::string::npos) continue;
      push_data(body, apply_left_control(s.substr(body, p - body), sign, true, line_starting));
      return end;
    }
    return fail(tag, "Missing end of raw directive");
  }

  // Tokens inside {% %} or {{ }} up to and including the closing tag.
  Result<size_t> lex_tag(size_t pos, bool block) {
    std::string_view s = src_;
    std::vector<char> balance;  // expected closing brackets
    while (true) {
      if (pos >= s.size()) return pos;  // the parser reports the missing end
      if (balance.empty()) {
        size_t end = std::string::npos;
        if (block) {
          end = match_block_close(pos, '%');
        } else if (s.compare(pos, 3, "-}}") == 0) {
          end = skip_spaces(s, pos + 3);
        } else if (s.compare(pos, 2, "}}") == 0) {
          end = pos + 2;
        }
        if (end != std::string::npos) {
          push(block ? Tok::kBlockEnd : Tok::kVariableEnd, pos);
          return end;
        }
      }
      size_t len = 0;
      if (space_at(s, pos, &len)) {
        pos += len;
        continue;
      }
      size_t end = match_float(pos);
      if (end != pos) {
        std::string digits;
        for (char c : s.substr(pos, end - pos)) {
          if (c != '_') digits.push_back(c);
        }
        Token& t = push(Tok::kFloat, pos);
        std::from_chars(digits.data(), digits.data() + digits.size(), t.float_value);
        pos = end;
        continue;
      }
      M2_ASSIGN_OR_RETURN(end, lex_integer(pos));
      if (end != pos) {
        pos = end;
        continue;
      }
      size_t p = pos;
      if (is_identifier_start(next_code_point(s, &p))) {
        size_t q = p;
        while (q < s.size()) {
          size_t r = q;
          if (!is_identifier_continue(next_code_point(s, &r))) break;
          q = r;
        }
        push(Tok::kName, pos).text = std::string(s.substr(pos, q - pos));
        pos = q;
        continue;
      }
      if (s[pos] == '\'' || s[pos] == '"') {
        M2_ASSIGN_OR_RETURN(pos, lex_string(pos));
        continue;
      }
      M2_ASSIGN_OR_RETURN(pos, lex_operator(pos, &balance));
    }
  }

  // Jinja's float_re: digits with either an exponent (optional fraction) or
  // a fraction, not preceded by '.'. Returns pos when there is no float.
  size_t match_float(size_t pos) const {
    std::string_view s = src_;
    if (pos > 0 && s[pos - 1] == '.') return pos;
    size_t p = scan_digit_groups(s, pos);
    if (p == pos) return pos;
    size_t frac_end = p;
    if (p + 1 < s.size() && s[p] == '.') {
      size_t q = scan_digit_groups(s, p + 1);
      if (q != p + 1) frac_end = q;
    }
    size_t e = frac_end;
    if (e < s.size() && (s[e] == 'e' || s[e] == 'E')) {
      size_t q = e + 1;
      if (q < s.size() && (s[q] == '+' || s[q] == '-')) ++q;
      size_t r = scan_digit_groups(s, q);
      if (r != q) return r;
    }
    return frac_end != p ? frac_end : pos;
  }

  Result<size_t> lex_integer(size_t pos) {
    std::string_view s = src_;
    if (!is_digit(s[pos])) return pos;
    int base = 10;
    size_t p = pos, digits_begin = pos;
    auto digit_ok = [&](char c) {
      c = char(std::tolower(static_cast<unsigned char>(c)));
      if (base == 2) return c == '0' || c == '1';
      if (base == 8) return c >= '0' && c <= '7';
      if (base == 16) return is_digit(c) || (c >= 'a' && c <= 'f');
      return is_digit(c);
    };
    if (s[pos] == '0' && pos + 1 < s.size()) {
      char b = char(std::tolower(static_cast<unsigned char>(s[pos + 1])));
      base = b == 'b' ? 2 : b == 'o' ? 8 : b == 'x' ? 16 : 10;
      digits_begin = base == 10 ? pos : pos + 2;
    }
    // `(_?digit)+` after a prefix; `[1-9](_?\d)*` or `0(_?0)*` in decimal.
    p = digits_begin;
    if (base == 10) {
      const bool zero = s[pos] == '0';
      p = pos + 1;
      while (p < s.size()) {
        size_t q = p + (s[p] == '_' ? 1 : 0);
        if (q < s.size() && (zero ? s[q] == '0' : is_digit(s[q])))
          p = q + 1;
        else
          break;
      }
    } else {
      while (p < s.size()) {
        size_t q = p + (s[p] == '_' ? 1 : 0);
        if (q < s.size() && digit_ok(s[q]))
          p = q + 1;
        else
          break;
      }
      if (p == digits_begin) {  // "0x" without digits: just the zero
        base = 10;
        digits_begin = pos;
        p = pos + 1;
      }
    }
    uint64_t value = 0;
    for (char c : s.substr(digits_begin, p - digits_begin)) {
      if (c == '_') continue;
      char lc = char(std::tolower(static_cast<unsigned char>(c)));
      uint64_t d = is_digit(lc) ? uint64_t(lc - '0') : uint64_t(lc - 'a' + 10);
      if (value > (uint64_t(std::numeric_limits<int64_t>::max()) - d) / uint64_t(base)) {
        return fail(pos, "integer literal does not fit in 64 bits");
      }
      value = value * uint64_t(base) + d;
    }
    push(Tok::kInteger, pos).int_value = int64_t(value);
    return p;
  }

  Result<size_t> lex_string(size_t pos) {
    std::string_view s = src_;
    const char quote = s[pos];
    size_t p = pos + 1;
    while (p < s.size() && s[p] != quote) p += s[p] == '\\' ? 2 : 1;
    if (p >= s.size())
      return fail(pos, fmt::format("unexpected char {} (unterminated string)", quote == '"' ? "'\"'" : "\"'\""));
    auto decoded = decode_string_literal(s.substr(pos + 1, p - pos - 1));
    if (!decoded.ok()) return fail(pos, decoded.status().message());
    push(Tok::kString, pos).text = std::move(decoded).value();
    return p + 1;
  }

  Result<size_t> lex_operator(size_t pos, std::vector<char>* balance) {
    static const std::pair<const char*, Op> kOps[] = {
        {"//", Op::kFloorDiv}, {"**", Op::kPow},   {"==", Op::kEq},      {"!=", Op::kNe},      {">=", Op::kGe},
        {"<=", Op::kLe},       {"+", Op::kAdd},    {"-", Op::kSub},      {"/", Op::kDiv},      {"*", Op::kMul},
        {"%", Op::kMod},       {"~", Op::kTilde},  {"[", Op::kLBracket}, {"]", Op::kRBracket}, {"(", Op::kLParen},
        {")", Op::kRParen},    {"{", Op::kLBrace}, {"}", Op::kRBrace},   {">", Op::kGt},       {"<", Op::kLt},
        {"=", Op::kAssign},    {".", Op::kDot},    {":", Op::kColon},    {"|", Op::kPipe},     {",", Op::kComma},
        {";", Op::kSemicolon},
    };
    std::string_view s = src_;
    for (const auto& [text, op] : kOps) {
      size_t n = std::char_traits<char>::length(text);
      if (s.compare(pos, n, text) != 0) continue;
      if (op == Op::kLBrace) balance->push_back('}');
      if (op == Op::kLParen) balance->push_back(')');
      if (op == Op::kLBracket) balance->push_back(']');
      if (op == Op::kRBrace || op == Op::kRParen || op == Op::kRBracket) {
        if (balance->empty()) return fail(pos, fmt::format("unexpected '{}'", text));
        if (balance->back() != text[0]) {
          return fail(pos, fmt::format("unexpected '{}', expected '{}'", text, balance->back()));
        }
        balance->pop_back();
      }
      push(Tok::kOperator, pos).op = op;
      return pos + n;
    }
    size_t p = pos;
    char32_t cp = next_code_point(s, &p);
    std::string shown;
    append_utf8(&shown, cp);
    return fail(pos, fmt::format("unexpected char '{}'", shown));
  }

  std::string src_;
  LexerOptions opt_;
  std::vector<size_t> line_starts_;
  std::vector<Token> tokens_;
};

// Jinja splits the source on \r\n, \r and \n and joins the lines with \n,
// dropping one trailing newline unless keep_trailing_newline is set.
std::string normalize_newlines(std::string_view source, bool keep_trailing_newline) {
  std::string out;
  out.reserve(source.size());
  for (size_t i = 0; i < source.size(); ++i) {
    char c = source[i];
    if (c == '\r') {
      if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
      out.push_back('\n');
    } else {
      out.push_back(c);
    }
  }
  if (!keep_trailing_newline && !out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

}  // namespace

Result<std::vector<Token>> tokenize(std::string_view source, const LexerOptions& options) {
  size_t bad = find_invalid_utf8(source);
  if (bad != std::string_view::npos) return errorf("invalid UTF-8 at byte {} of the template", bad);
  Lexer lexer(normalize_newlines(source, options.keep_trailing_newline), options);
  return lexer.run();
}

}  // namespace m2::text::jinja
