// The thinking fields of an OpenAI chat-completions body (the Anthropic
// route converts `thinking` and `output_config.effort` to them):
//  - `chat_template_kwargs.enable_thinking` (vLLM): reaches the template;
//    false on M2's template closes the reasoning in the prompt
//    (chat_template.h);
//  - `reasoning_effort`: "none" turns thinking off (enable_thinking false
//    unless the request set it), the other levels cap the reasoning at a
//    budget (kEffortBudgets; "max": no cap);
//  - `thinking_token_budget` (vLLM): the cap itself, in tokens; it wins over
//    the effort's.
// The cap applies when the prompt leaves the reasoning open: once that many
// tokens have been generated without `</think>`, `</think>` is forced and
// the answer follows (SamplingParams::reasoning_budget).
#pragma once

#include <string_view>

#include "util/json.h"
#include "util/status.h"

namespace m2::server {

struct EffortBudget {
  std::string_view effort;
  int budget;  // -1: no cap
};
inline constexpr EffortBudget kEffortBudgets[] = {
    {"minimal", 256}, {"low", 1024}, {"medium", 4096}, {"high", 16384}, {"xhigh", 32768}, {"max", -1}};

struct ThinkingRequest {
  int budget = -1;  // reasoning tokens before `</think>` is forced; -1: no cap
};

// Reads the fields above and, for "none", sets
// `chat_template_kwargs.enable_thinking` in `request` (the body to render).
// Errors are the client's (400) and name the field.
Result<ThinkingRequest> parse_thinking_request(const OrderedJson& body, OrderedJson& request);

}  // namespace m2::server
