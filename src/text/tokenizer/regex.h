// A compiled regex with the match iteration of HF tokenizers (the `onig`
// crate's find_iter), run by PCRE2 with JIT.
//
// Thread-safe: the compiled code is shared, match data and the JIT stack
// are per thread.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "text/tokenizer/component_json.h"
#include "util/status.h"

namespace m2::text::tok {

class Regex {
 public:
  // From an Oniguruma pattern (translated, see onig_translate.h).
  static Result<std::unique_ptr<Regex>> from_onig(std::string_view pattern);
  // Matching `literal` verbatim.
  static Result<std::unique_ptr<Regex>> from_literal(std::string_view literal);
  ~Regex();
  Regex(const Regex&) = delete;
  Regex& operator=(const Regex&) = delete;

  // Appends the [start, end) byte spans of the successive matches in `text`
  // (valid UTF-8). Like onig's find_iter, an empty match right where the
  // previous match ended is skipped by advancing one character.
  Status find_all(std::string_view text, std::vector<std::pair<size_t, size_t>>& out) const;

  const std::string& source() const { return source_; }
  const std::string& pcre2_pattern() const { return pcre2_; }

 private:
  Regex() = default;
  static Result<std::unique_ptr<Regex>> compile(std::string source, std::string pcre2_pattern);
  std::string source_;
  std::string pcre2_;
  void* code_ = nullptr;  // pcre2_code*
};

// A Split / Replace pattern object: {"String": "..."} or {"Regex": "..."}.
Result<std::unique_ptr<Regex>> make_pattern(const JsonNode& node);

}  // namespace m2::text::tok
