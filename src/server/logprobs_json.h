// Token logprobs in the two OpenAI shapes: chat's `logprobs.content[]`
// ({token, logprob, bytes, top_logprobs}) and completions' parallel lists
// ({tokens, token_logprobs, top_logprobs, text_offset}).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/sampler.h"
#include "text/tokenizer/tokenizer.h"
#include "util/json.h"

namespace m2::server {

class TokenFormatter {
 public:
  // `as_ids`: vLLM's return_tokens_as_token_ids ("token_id:123").
  TokenFormatter(const text::Tokenizer& tokenizer, bool as_ids) : tokenizer_(tokenizer), as_ids_(as_ids) {}
  // The token's text (a lone piece of a multi-byte character decodes to U+FFFD).
  std::string text(int32_t id) const;
  // The token's own bytes (the UTF-8 of text() when the decoder is not byte-level).
  std::vector<int> bytes(int32_t id) const;

 private:
  const text::Tokenizer& tokenizer_;
  bool as_ids_;
};

// -inf (a token the model cannot produce) as vLLM writes it: JSON has no infinity.
double finite_logprob(float lp);

// One entry of chat's `logprobs.content`.
OrderedJson chat_logprob(const TokenFormatter& f, const SampledToken& t);

// Completions' logprobs object, built token by token.
class CompletionLogprobs {
 public:
  explicit CompletionLogprobs(const TokenFormatter& f) : f_(f) {}
  // A prompt token (echo): its logprob and top alternatives, or none for the first.
  void add_prompt(int32_t id, const std::vector<TokenLogprob>* entry, size_t text_offset);
  void add(const SampledToken& t, size_t text_offset);
  bool empty() const { return tokens_.empty(); }
  OrderedJson json() const;
  void clear();

 private:
  const TokenFormatter& f_;
  OrderedJson tokens_ = OrderedJson::array(), logprobs_ = OrderedJson::array(), top_ = OrderedJson::array(),
              offsets_ = OrderedJson::array();
};

}  // namespace m2::server
