// An Anthropic Messages request -> the OpenAI chat body that the chat
// prompt builder takes, and the sampling request:
//  - `system` (string or text blocks) becomes the first, system message;
//  - user blocks: `text`; `tool_result` (string or text blocks; `is_error`
//    prefixes "Error: ") becomes a `tool` message, in block order;
//  - assistant blocks: `thinking` becomes `reasoning_content` (its
//    `signature` must be this server's for its text, thinking_signature.h:
//    the model's own reasoning goes back into the template, which is what
//    interleaved thinking needs, and nobody else's),
//    `redacted_thinking` is dropped, `text` is the content, `tool_use`
//    becomes a tool call with `input` as its arguments;
//  - a final assistant message is a prefill: continue_final_message (an
//    empty one is dropped; trailing whitespace is refused, as Anthropic does);
//  - `tools` ({name, description, input_schema}) become functions;
//    `tool_choice` auto / any (= required) / tool (= named) / none, its
//    `disable_parallel_tool_use` as parallel_tool_calls: false;
//  - `thinking`: disabled -> enable_thinking false (the prompt closes the
//    reasoning), enabled -> its budget_tokens as thinking_token_budget,
//    adaptive -> the model's own length; `output_config.effort` ->
//    reasoning_effort (the budgets of thinking_request.h);
//  - `stop_sequences`, `temperature`, `top_p`, `top_k`, `max_tokens`
//    (required, except for count_tokens).
// Images, documents and server tools are refused (400): the model reads text.
#pragma once

#include "engine/sampling_params.h"
#include "server/sampling_request.h"
#include "server/thinking_signature.h"
#include "util/json.h"
#include "util/status.h"

namespace m2::server {

struct AnthropicRequest {
  OrderedJson chat_body;     // {"messages", ["tools"], ["tool_choice"], ["parallel_tool_calls"]}
  SamplingRequest sampling;  // unset for count_tokens
  bool stream = false;
};

Result<AnthropicRequest> parse_anthropic_request(const OrderedJson& body, const SamplingParams& defaults,
                                                 const ThinkingSigner& signer, bool count_tokens_only);

}  // namespace m2::server
