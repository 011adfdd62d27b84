#include "text/tokenizer/onig_translate.h"

#include <algorithm>
#include <cctype>
#include <optional>

#include "text/tokenizer/pcre2_classes.h"
#include "text/tokenizer/utf8.h"

namespace m2::text::tok {
namespace {

using enum GeneralCategory;

// A class member: either a category union (written with PCRE2 properties)
// or an explicit set.
struct ClassItem {
  std::optional<CategoryMask> categories;
  CodepointSet set;
  bool negated = false;
};

// Oniguruma's names of general categories, compared loosely (case, spaces,
// '_' and '-' ignored) as Oniguruma does.
std::optional<CategoryMask> category_by_name(std::string_view raw) {
  std::string name;
  for (char ch : raw) {
    if (ch == ' ' || ch == '_' || ch == '-') continue;
    name += static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  }
  struct Entry {
    const char* short_name;
    const char* long_name;
    CategoryMask mask;
  };
  const CategoryMask letters =
      category_bit(kLu) | category_bit(kLl) | category_bit(kLt) | category_bit(kLm) | category_bit(kLo);
  const CategoryMask marks = category_bit(kMn) | category_bit(kMc) | category_bit(kMe);
  const CategoryMask numbers = category_bit(kNd) | category_bit(kNl) | category_bit(kNo);
  const CategoryMask puncts = category_bit(kPc) | category_bit(kPd) | category_bit(kPs) | category_bit(kPe) |
                              category_bit(kPi) | category_bit(kPf) | category_bit(kPo);
  const CategoryMask symbols = category_bit(kSm) | category_bit(kSc) | category_bit(kSk) | category_bit(kSo);
  const CategoryMask seps = category_bit(kZs) | category_bit(kZl) | category_bit(kZp);
  const CategoryMask others =
      category_bit(kCc) | category_bit(kCf) | category_bit(kCo) | category_bit(kCn) | category_bit(kCs);
  const Entry table[] = {
      {"l", "letter", letters},
      {"lc", "casedletter", category_bit(kLu) | category_bit(kLl) | category_bit(kLt)},
      {"lu", "uppercaseletter", category_bit(kLu)},
      {"ll", "lowercaseletter", category_bit(kLl)},
      {"lt", "titlecaseletter", category_bit(kLt)},
      {"lm", "modifierletter", category_bit(kLm)},
      {"lo", "otherletter", category_bit(kLo)},
      {"m", "mark", marks},
      {"mn", "nonspacingmark", category_bit(kMn)},
      {"mc", "spacingmark", category_bit(kMc)},
      {"me", "enclosingmark", category_bit(kMe)},
      {"n", "number", numbers},
      {"nd", "decimalnumber", category_bit(kNd)},
      {"nl", "letternumber", category_bit(kNl)},
      {"no", "othernumber", category_bit(kNo)},
      {"p", "punctuation", puncts},
      {"pc", "connectorpunctuation", category_bit(kPc)},
      {"pd", "dashpunctuation", category_bit(kPd)},
      {"ps", "openpunctuation", category_bit(kPs)},
      {"pe", "closepunctuation", category_bit(kPe)},
      {"pi", "initialpunctuation", category_bit(kPi)},
      {"pf", "finalpunctuation", category_bit(kPf)},
      {"po", "otherpunctuation", category_bit(kPo)},
      {"s", "symbol", symbols},
      {"sm", "mathsymbol", category_bit(kSm)},
      {"sc", "currencysymbol", category_bit(kSc)},
      {"sk", "modifiersymbol", category_bit(kSk)},
      {"so", "othersymbol", category_bit(kSo)},
      {"z", "separator", seps},
      {"zs", "spaceseparator", category_bit(kZs)},
      {"zl", "lineseparator", category_bit(kZl)},
      {"zp", "paragraphseparator", category_bit(kZp)},
      {"c", "other", others},
      {"cc", "control", category_bit(kCc)},
      {"cf", "format", category_bit(kCf)},
      {"co", "privateuse", category_bit(kCo)},
      {"cn", "unassigned", category_bit(kCn)},
      {"cs", "surrogate", category_bit(kCs)},
  };
  for (const auto& e : table) {
    if (name == e.short_name || name == e.long_name) return e.mask;
  }
  return std::nullopt;
}

const CodepointSet& hex_digit_set() {
  static const CodepointSet s =
      CodepointSet::from_ranges(std::vector<CodepointRange>{{'0', '9'}, {'A', 'F'}, {'a', 'f'}});
  return s;
}

const CodepointSet& all_codepoints() {
  static const CodepointSet s = CodepointSet::from_ranges(std::vector<CodepointRange>{{0, 0x10FFFF}});
  return s;
}

// Body of a positive class for `item`.
std::string item_body(const ClassItem& item) {
  if (item.categories && !item.negated) return pcre2_category_body(*item.categories);
  const CodepointSet& base = item.categories ? category_set(*item.categories) : item.set;
  return pcre2_ranges_body(item.negated ? base.complement() : base);
}

// A class matching exactly `item` (outside any other class).
std::string standalone_class(const ClassItem& item) {
  if (item.categories && item.negated) return fmt::format("[^{}]", pcre2_category_body(*item.categories));
  std::string body = item_body(item);
  return body.empty() ? std::string("(?!)") : fmt::format("[{}]", body);
}

class Translator {
 public:
  explicit Translator(std::string_view p) : p_(p) {}

  Result<std::string> run() {
    while (i_ < p_.size()) {
      const char c = p_[i_];
      if (c == '\\') {
        run_.clear();
        M2_RETURN_IF_ERROR(escape_outside());
      } else if (c == '[') {
        run_.clear();
        M2_RETURN_IF_ERROR(char_class());
      } else if (c == '(') {
        run_.clear();
        if (peek(1) == '?') {
          M2_RETURN_IF_ERROR(group_head());
        } else {
          caseless_.push_back(caseless_.back());
          out_ += c;
          ++i_;
        }
      } else if (c == ')') {
        run_.clear();
        if (caseless_.size() > 1) caseless_.pop_back();
        out_ += c;
        ++i_;
      } else if (c == '{' && peek(1) == ',') {
        run_.clear();
        // Oniguruma {,n} = {0,n}; PCRE2 10.42 would read it as a literal.
        size_t j = i_ + 2;
        while (j < p_.size() && std::isdigit(static_cast<unsigned char>(p_[j]))) ++j;
        if (j > i_ + 2 && j < p_.size() && p_[j] == '}') {
          out_ += fmt::format("{{0,{}}}", p_.substr(i_ + 2, j - i_ - 2));
          i_ = j + 1;
        } else {
          out_ += c;
          ++i_;
        }
      } else if (std::string_view("|*+?.^${}").find(c) != std::string_view::npos) {
        run_.clear();
        out_ += c;
        ++i_;
      } else {
        M2_RETURN_IF_ERROR(literal());
      }
    }
    return out_;
  }

 private:
  char peek(size_t k) const { return i_ + k < p_.size() ? p_[i_ + k] : '\0'; }
  bool caseless() const { return caseless_.back(); }

  // Case-insensitive matching is mirrored only where PCRE2 and Oniguruma
  // fold alike: ASCII. Oniguruma also folds across lengths (ß = ss, ﬁ = fi,
  // ẗ = t + U+0308) and with newer Unicode data, so a caseless non-ASCII
  // literal, or an ASCII run that some character folds to, is refused.
  Status literal() {
    const size_t start = i_;
    const char32_t cp = next_codepoint(p_, i_);
    out_ += p_.substr(start, i_ - start);
    if (!caseless()) return {};
    if (cp >= 0x80) return error(start, "case-insensitive non-ASCII literal is not supported");
    if (!std::isalpha(static_cast<int>(cp))) {
      run_.clear();
      return {};
    }
    run_ += static_cast<char>(std::tolower(static_cast<int>(cp)));
    for (std::string_view folded : {"ss", "st", "ff", "fi", "fl"}) {
      if (run_.ends_with(folded)) {
        return error(start,
                     fmt::format("case-insensitive '{}' (a multi-character case fold) is not supported", folded));
      }
    }
    return {};
  }

  // Refuses caseless escapes PCRE2 would fold differently: code points
  // beyond ASCII, and case-specific categories.
  Status check_caseless_escape(size_t at, std::string_view escape, const ClassItem* item) const {
    if (!caseless()) return {};
    if (item) {
      const CategoryMask cased = category_bit(kLu) | category_bit(kLl) | category_bit(kLt);
      if (item->categories && (*item->categories & cased) && (*item->categories & cased) != cased) {
        return error(at, "a case-specific category in a case-insensitive region is not supported");
      }
      return {};
    }
    if (escape.size() >= 2 && (escape[1] == 'x' || escape[1] == 'u' || escape[1] == '0')) {
      std::string digits;
      for (char ch : escape.substr(2)) {
        if (std::isxdigit(static_cast<unsigned char>(ch))) digits += ch;
      }
      uint64_t value = 0;
      for (char ch : digits) {
        value = std::min<uint64_t>(
            value * (escape[1] == '0' ? 8 : 16) +
                (std::isdigit(static_cast<unsigned char>(ch)) ? ch - '0' : std::tolower(ch) - 'a' + 10),
            0x110000);
      }
      if (value >= 0x80) return error(at, "a case-insensitive non-ASCII escape is not supported");
    }
    return {};
  }

  Status error(size_t at, std::string_view what) const { return errorf("regex /{}/: {} at byte {}", p_, what, at); }

  // Parses \p{..} / \P{..} / \p{^..} at i_ (i_ at the backslash); fills item
  // or, for a script, sets `script` to its PCRE2 form.
  Status property(ClassItem& item, std::string& script) {
    const size_t start = i_;
    const bool upper = p_[i_ + 1] == 'P';
    if (peek(2) != '{') return error(start, "\\p without {name}");
    const size_t close = p_.find('}', i_ + 3);
    if (close == std::string_view::npos) return error(start, "unterminated \\p{");
    std::string_view name = p_.substr(i_ + 3, close - i_ - 3);
    bool negated = upper;
    if (!name.empty() && name[0] == '^') {
      negated = !negated;
      name.remove_prefix(1);
    }
    i_ = close + 1;
    item.negated = negated;
    if (auto mask = category_by_name(name)) {
      item.categories = *mask;
      return {};
    }
    std::string lowered;
    for (char ch : name) lowered += static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    if (lowered == "any") {
      item.set = all_codepoints();
      return {};
    }
    for (char ch : name) {
      if (!std::isalnum(static_cast<unsigned char>(ch)) && ch != '_') return error(start, "bad property name");
    }
    script = fmt::format("\\{}{{sc:{}}}", negated ? 'P' : 'p', name);
    return {};
  }

  // Shorthand classes shared by both contexts; false if `letter` is not one.
  bool shorthand(char letter, ClassItem& item) {
    const bool neg = std::isupper(static_cast<unsigned char>(letter));
    switch (std::tolower(static_cast<unsigned char>(letter))) {
      case 's':
        item.set = white_space_set();
        break;
      case 'd':
        item.categories = category_bit(kNd);
        break;
      case 'w':
        item.set = onig_word_set();
        break;
      case 'h':
        item.set = hex_digit_set();
        break;
      default:
        return false;
    }
    item.negated = neg;
    return true;
  }

  // Escapes valid in both contexts that need a rewrite; returns true if done.
  bool common_escape(char e) {
    if (e == 'v') {  // Oniguruma: vertical tab only (PCRE2: a class)
      out_ += "\\x{B}";
      i_ += 2;
      return true;
    }
    if (e == 'u') {
      size_t j = i_ + 2;
      while (j < p_.size() && j < i_ + 6 && std::isxdigit(static_cast<unsigned char>(p_[j]))) ++j;
      if (j == i_ + 6) {
        out_ += fmt::format("\\x{{{}}}", p_.substr(i_ + 2, 4));
        i_ = j;
        return true;
      }
    }
    return false;
  }

  Status escape_outside() {
    const size_t start = i_;
    const char e = peek(1);
    if (e == '\0') return error(start, "trailing backslash");
    if (e == 'p' || e == 'P') {
      ClassItem item;
      std::string script;
      M2_RETURN_IF_ERROR(property(item, script));
      M2_RETURN_IF_ERROR(check_caseless_escape(start, {}, &item));
      out_ += script.empty() ? standalone_class(item) : script;
      return {};
    }
    ClassItem item;
    if (shorthand(e, item)) {
      out_ += standalone_class(item);
      i_ += 2;
      return {};
    }
    if (e == 'u') M2_RETURN_IF_ERROR(check_caseless_escape(start, p_.substr(i_, 6), nullptr));
    if (common_escape(e)) return {};
    if (e == 'b' || e == 'B') {
      // Word boundary on Oniguruma's \w.
      const std::string w = fmt::format("[{}]", pcre2_ranges_body(onig_word_set()));
      out_ += e == 'b' ? fmt::format("(?:(?<={0})(?!{0})|(?<!{0})(?={0}))", w)
                       : fmt::format("(?:(?<={0})(?={0})|(?<!{0})(?!{0}))", w);
      i_ += 2;
      return {};
    }
    if (e == 'O') {
      out_ += "(?s:.)";
      i_ += 2;
      return {};
    }
    if (e == 'X' || e == 'y' || e == 'Y') return error(start, "grapheme escapes are not supported");
    static constexpr std::string_view kPassLetters = "AzZGKRNntrfaexkgc";
    if (std::isalpha(static_cast<unsigned char>(e)) && kPassLetters.find(e) == std::string_view::npos) {
      return error(start, fmt::format("unsupported escape \\{}", e));
    }
    // Literal escapes, \xHH, \x{..}, octal and back-references: same in PCRE2.
    const std::string_view escape = p_.substr(i_, escape_length());
    M2_RETURN_IF_ERROR(check_caseless_escape(start, escape, nullptr));
    out_ += escape;
    i_ += escape.size();
    return {};
  }

  // Length of the pass-through escape at i_ (\x{..}, \xHH, \0oo, \12,
  // \k<name>, \g<name>, \cX, or a backslash and one character).
  size_t escape_length() const {
    const char e = peek(1);
    auto run_of = [&](size_t from, size_t max, auto pred) {
      size_t j = from;
      while (j < p_.size() && j - from < max && pred(static_cast<unsigned char>(p_[j]))) ++j;
      return j - i_;
    };
    if (e == 'x' && peek(2) == '{') {
      const size_t close = p_.find('}', i_);
      return close == std::string_view::npos ? p_.size() - i_ : close + 1 - i_;
    }
    if (e == 'x') return run_of(i_ + 2, 2, [](unsigned char ch) { return std::isxdigit(ch) != 0; });
    if (e == '0') return run_of(i_ + 2, 2, [](unsigned char ch) { return ch >= '0' && ch <= '7'; });
    if (e >= '1' && e <= '9') return run_of(i_ + 1, 3, [](unsigned char ch) { return std::isdigit(ch) != 0; });
    if ((e == 'k' || e == 'g') && (peek(2) == '<' || peek(2) == '\'')) {
      const size_t close = p_.find(peek(2) == '<' ? '>' : '\'', i_ + 3);
      return close == std::string_view::npos ? p_.size() - i_ : close + 1 - i_;
    }
    if (e == 'c' && i_ + 2 < p_.size()) return 3;
    size_t j = i_ + 1;
    next_codepoint(p_, j);
    return j - i_;
  }

  Status char_class() {
    const size_t start = i_;
    ++i_;
    bool negated = false;
    if (peek(0) == '^') {
      negated = true;
      ++i_;
    }
    std::string body;
    bool first = true;
    while (true) {
      if (i_ >= p_.size()) return error(start, "unterminated character class");
      const char c = p_[i_];
      if (c == ']' && !first) {
        ++i_;
        break;
      }
      first = false;
      if (c == '[') return error(i_, "nested classes and POSIX brackets are not supported");
      if (c == '&' && peek(1) == '&') return error(i_, "class intersection (&&) is not supported");
      if (c == '\\') {
        const size_t at = i_;
        const char e = peek(1);
        if (e == '\0') return error(i_, "trailing backslash");
        ClassItem item;
        std::string script;
        if (e == 'p' || e == 'P') {
          M2_RETURN_IF_ERROR(property(item, script));
          M2_RETURN_IF_ERROR(check_caseless_escape(at, {}, &item));
          body += script.empty() ? item_body(item) : script;
          continue;
        }
        if (shorthand(e, item)) {
          body += item_body(item);
          i_ += 2;
          continue;
        }
        if (e == 'u') M2_RETURN_IF_ERROR(check_caseless_escape(at, p_.substr(i_, 6), nullptr));
        std::swap(out_, body);  // common_escape writes to out_
        const bool done = common_escape(e);
        std::swap(out_, body);
        if (done) continue;
        const std::string_view escape = p_.substr(i_, escape_length());
        M2_RETURN_IF_ERROR(check_caseless_escape(at, escape, nullptr));
        body += escape;
        i_ += escape.size();
        continue;
      }
      const size_t at = i_;
      if (next_codepoint(p_, i_) >= 0x80 && caseless()) {
        return error(at, "case-insensitive non-ASCII literal is not supported");
      }
      body += p_.substr(at, i_ - at);
    }
    if (body.empty()) {
      out_ += negated ? "(?s:.)" : "(?!)";
    } else {
      out_ += fmt::format("[{}{}]", negated ? "^" : "", body);
    }
    return {};
  }

  Status group_head() {
    const size_t start = i_;
    const char k = peek(2);
    // Non-capturing, lookaround, atomic and named groups: same syntax.
    if (k == ':' || k == '=' || k == '!' || k == '>' || k == '<' || k == '\'' || k == 'P') {
      caseless_.push_back(caseless());
      out_ += p_.substr(i_, 3);
      i_ += 3;
      return {};
    }
    if (k == '#') {
      const size_t close = p_.find(')', i_);
      if (close == std::string_view::npos) return error(start, "unterminated comment");
      i_ = close + 1;
      return {};
    }
    if (k == '~') return error(start, "the absent operator (?~...) is not supported");
    // Option group: (?im-im) for the rest of the group, or (?im-im:...).
    // Ruby's m is PCRE2's s (dot matches newline).
    std::string head = "(?";
    bool on = true, flag_i = caseless();
    size_t j = i_ + 2;
    for (; j < p_.size() && p_[j] != ')' && p_[j] != ':'; ++j) {
      const char o = p_[j];
      if (o == '-') {
        on = false;
        head += o;
      } else if (o == 'i') {
        flag_i = on;
        head += o;
      } else if (o == 'm') {
        head += 's';
      } else {
        return error(j, fmt::format("unsupported group option '{}'", o));
      }
    }
    if (j >= p_.size()) return error(start, "unterminated group");
    if (p_[j] == ':') {
      caseless_.push_back(flag_i);
    } else {
      caseless_.back() = flag_i;
    }
    head += p_[j];
    out_ += head;
    i_ = j + 1;
    return {};
  }

  std::string_view p_;
  size_t i_ = 0;
  std::string out_;
  std::vector<bool> caseless_{false};  // per open group
  std::string run_;                    // lowercased ASCII letters of the current caseless literal run
};

}  // namespace

Result<std::string> translate_onig_pattern(std::string_view pattern) {
  if (find_invalid_utf8(pattern) != std::string_view::npos) {
    return errorf("regex pattern is not valid UTF-8");
  }
  return Translator(pattern).run();
}

std::string pcre2_escape_literal(std::string_view literal) {
  std::string out;
  for (char c : literal) {
    if (std::isalnum(static_cast<unsigned char>(c)) || static_cast<unsigned char>(c) >= 0x80) {
      out += c;
    } else {
      out += fmt::format("\\x{{{:X}}}", static_cast<unsigned char>(c));
    }
  }
  return out;
}

}  // namespace m2::text::tok
