// A /v1/responses request -> the OpenAI chat body that the chat prompt
// builder takes (as the Anthropic route does), so the Responses API shares
// the chat path's tool, thinking and sampling semantics:
//  - `instructions` becomes the first, system message (not carried over
//    from a previous response, as OpenAI documents);
//  - `previous_response_id`: the stored conversation (response_store.h) is
//    put before this request's input;
//  - `input`: a string (one user message) or items: messages (role user /
//    assistant / system / developer; content a string or input_text /
//    output_text parts), `reasoning` items (their encrypted_content when
//    this server sealed it, else their reasoning_text content, else their
//    summary, becomes the next assistant turn's reasoning_content), `function_call` items (tool calls of that
//    assistant turn) and `function_call_output` items (tool messages);
//  - `tools` ({type: function, name, description, parameters, strict}) and
//    `tool_choice` ("none" / "auto" / "required" / {type: function, name} /
//    {type: allowed_tools, mode, tools}) in their chat form,
//    `parallel_tool_calls`;
//  - `reasoning.effort` -> reasoning_effort (thinking_request.h's budgets);
//  - `max_output_tokens` -> max_tokens, `temperature`, `top_p`, and vLLM's
//    sampling extensions (top_k, min_p, seed, stop, ignore_eos, ...) and
//    chat_template_kwargs / thinking_token_budget as on chat;
//    `text.format` -> response_format (json formats are refused there until
//    constrained decoding lands).
// What is not implemented is refused with a 400 naming the field
// (background, conversation, prompt, truncation "auto", non-function tools,
// images and files, top_logprobs); informational fields are accepted.
#pragma once

#include <string>

#include "engine/sampling_params.h"
#include "server/sampling_request.h"
#include "server/thinking_signature.h"
#include "util/json.h"
#include "util/status.h"

namespace m2::server {

struct ResponsesRequest {
  OrderedJson chat_body;     // {"messages", ["tools"], ["tool_choice"], ...} for build_chat_turn
  OrderedJson new_messages;  // the chat messages of this request's input (no instructions)
  OrderedJson input_items;   // the input as items, each with an id
  SamplingRequest sampling;
  bool stream = false;
  bool store = true;
  bool summary = false;              // reasoning.summary asked: the reasoning is also sent as a summary part
  bool encrypted_reasoning = false;  // include: reasoning.encrypted_content
  OrderedJson echo;                  // request fields a response repeats (instructions, tools, ...)
};

// The field whose value names the response to continue ("" when absent).
Result<std::string> previous_response_id(const OrderedJson& body);

// `previous`: the stored conversation of previous_response_id (chat
// messages), or null; `signer` opens reasoning items' encrypted_content.
// Errors are the client's (400) and name the field.
Result<ResponsesRequest> parse_responses_request(const OrderedJson& body, const SamplingParams& defaults,
                                                 const OrderedJson& previous, const ThinkingSigner& signer);

}  // namespace m2::server
