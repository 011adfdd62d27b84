#include "text/tokenizer/regex.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "text/tokenizer/onig_translate.h"
#include "text/tokenizer/utf8.h"

namespace m2::text::tok {
namespace {

// Per-thread match state. The JIT stack grows up to 64 MiB so that long
// inputs (tens of KB in one pre-token) never hit the default 32 KiB limit.
struct MatchState {
  pcre2_match_data* data = pcre2_match_data_create(1, nullptr);
  pcre2_match_context* context = pcre2_match_context_create(nullptr);
  pcre2_jit_stack* stack = pcre2_jit_stack_create(32 * 1024, 64 * 1024 * 1024, nullptr);
  MatchState() { pcre2_jit_stack_assign(context, nullptr, stack); }
  ~MatchState() {
    pcre2_jit_stack_free(stack);
    pcre2_match_context_free(context);
    pcre2_match_data_free(data);
  }
};

MatchState& match_state() {
  thread_local MatchState state;
  return state;
}

std::string pcre2_message(int code) {
  PCRE2_UCHAR buf[256];
  pcre2_get_error_message(code, buf, sizeof(buf));
  return reinterpret_cast<const char*>(buf);
}

}  // namespace

Result<std::unique_ptr<Regex>> Regex::compile(std::string source, std::string pcre2_pattern) {
  pcre2_compile_context* ctx = pcre2_compile_context_create(nullptr);
  pcre2_set_newline(ctx, PCRE2_NEWLINE_LF);  // Oniguruma: only \n ends a line
  int err = 0;
  PCRE2_SIZE err_off = 0;
  // MULTILINE: in Ruby syntax ^ and $ are line anchors.
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pcre2_pattern.data()), pcre2_pattern.size(),
                                   PCRE2_UTF | PCRE2_UCP | PCRE2_MULTILINE, &err, &err_off, ctx);
  pcre2_compile_context_free(ctx);
  if (!code) {
    return errorf("regex /{}/: PCRE2 rejects its translation at byte {}: {}", source, err_off, pcre2_message(err));
  }
  pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);  // falls back to the interpreter if JIT is unavailable
  std::unique_ptr<Regex> re(new Regex());
  re->source_ = std::move(source);
  re->pcre2_ = std::move(pcre2_pattern);
  re->code_ = code;
  return re;
}

Result<std::unique_ptr<Regex>> Regex::from_onig(std::string_view pattern) {
  M2_ASSIGN_OR_RETURN(std::string translated, translate_onig_pattern(pattern));
  return compile(std::string(pattern), std::move(translated));
}

Result<std::unique_ptr<Regex>> Regex::from_literal(std::string_view literal) {
  if (find_invalid_utf8(literal) != std::string_view::npos) return errorf("literal pattern is not valid UTF-8");
  return compile(std::string(literal), pcre2_escape_literal(literal));
}

Regex::~Regex() { pcre2_code_free(static_cast<pcre2_code*>(code_)); }

Status Regex::find_all(std::string_view text, std::vector<std::pair<size_t, size_t>>& out) const {
  auto* code = static_cast<pcre2_code*>(code_);
  MatchState& st = match_state();
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  size_t search_from = 0;
  bool have_last = false;
  size_t last_end = 0;
  while (search_from <= text.size()) {
    const int rc = pcre2_match(code, subject, text.size(), search_from, PCRE2_NO_UTF_CHECK, st.data, st.context);
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc < 0) {
      return errorf("regex /{}/: matching failed at byte {}: {}", source_, search_from, pcre2_message(rc));
    }
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(st.data);
    const size_t s = ov[0], e = ov[1];
    if (s == e && have_last && last_end == e) {
      // onig crate: no empty match right after the previous one; step one character.
      if (search_from >= text.size()) break;
      search_from += utf8_sequence_length(static_cast<unsigned char>(text[search_from]));
      continue;
    }
    out.emplace_back(s, e);
    have_last = true;
    last_end = e;
    search_from = e;
    if (s == e && e == text.size()) break;
  }
  return {};
}

// {"String": "..."} or {"Regex": "..."} (Split and Replace patterns).
Result<std::unique_ptr<Regex>> make_pattern(const JsonNode& node) {
  if (!node.json.is_object() || node.json.size() != 1) {
    return node.error("expected {\"String\": ...} or {\"Regex\": ...}");
  }
  if (node.has("String")) {
    M2_ASSIGN_OR_RETURN(std::string s, node.string_field("String"));
    return Regex::from_literal(s);
  }
  if (node.has("Regex")) {
    M2_ASSIGN_OR_RETURN(std::string s, node.string_field("Regex"));
    auto re = Regex::from_onig(s);
    if (!re.ok()) return re.status().with_context(node.child_path("Regex"));
    return re;
  }
  return node.error("expected {\"String\": ...} or {\"Regex\": ...}");
}

}  // namespace m2::text::tok
