// The test-only generation source of `m2cpp serve --replay FILE`: instead of
// sampling, the engine emits the tokens of a given raw M2 output (forced
// tokens, see SamplingParams::forced_tokens), so tool-call and reasoning
// streams go end to end through the real engine, detokenizer, parsers and
// API layers although a random test model never writes them.
//
// FILE is either plain text (the raw output, for every request) or a JSON
// object {"outputs": [{"match": "...", "output": "..."}, ...]}: the first
// entry whose `match` occurs in the request's prompt text is used; an entry
// without `match` matches every prompt. The output is what the model writes
// after the generation prompt (reasoning, `</think>`, answer, tool calls);
// it ends with the EOS `[e~[` to stop there, else sampling resumes after it.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "text/tokenizer/tokenizer.h"
#include "util/status.h"

namespace m2::server {

class ReplaySource {
 public:
  static Result<ReplaySource> load(const std::string& path, const text::Tokenizer& tokenizer);

  // The tokens to emit for a prompt, or nullopt when no entry matches.
  std::optional<std::vector<int32_t>> select(std::string_view prompt_text) const;
  size_t size() const { return entries_.size(); }

 private:
  struct Entry {
    std::optional<std::string> match;
    std::vector<int32_t> tokens;
  };
  std::vector<Entry> entries_;
};

}  // namespace m2::server
