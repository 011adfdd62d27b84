// An OpenAI chat-completions body -> the prompt tokens, the parser options
// for the reply, and the forced tool-call opening of tool_choice "required"
// or a named function; then, with the request's sampling fields, the one
// engine job of the turn. Shared by /v1/chat/completions and /v1/messages
// (which converts its body to this shape first).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/constraint.h"
#include "server/generation.h"
#include "server/sampling_request.h"
#include "server/server_context.h"
#include "text/assistant_output_parser.h"
#include "text/chat_template.h"
#include "text/tokenizer/tokenizer.h"
#include "util/json.h"
#include "util/status.h"

namespace m2::server {

struct ChatPrompt {
  std::string text;                    // the rendered template
  std::vector<int32_t> tokens;
  text::AssistantParseOptions parse;   // reasoning mode left to the caller
  // The engine inserts `forced_after` once the model emits `forced_after_token`.
  int32_t forced_after_token = -1;
  std::vector<int32_t> forced_after;
  std::vector<int32_t> forced_first;   // the same, when the prompt does not open a reasoning
  std::string forced_tool;             // a named tool_choice: its name
  bool stop_after_first_call = false;  // parallel_tool_calls: false
  bool legacy_functions = false;       // the request used `functions`: answer `function_call`
  // The prompt leaves the reasoning open: `</think>`'s id, and the request's
  // thinking budget (thinking_request.h; -1: none).
  int32_t reasoning_end_token = -1;
  int reasoning_budget = -1;
  // The grammar of a forced call's arguments, or of strict tools' calls
  // (structured_output.h); it applies after the reasoning.
  std::optional<ConstraintSource> tool_grammar;
};

// Checks roles (system, developer, user, assistant, tool, and the legacy
// function; "developer" is rendered as "system"), the tool fields
// (tool_request.h) and the thinking fields (thinking_request.h), renders the
// template and tokenizes. Errors are the client's (400).
Result<ChatPrompt> build_chat_prompt(const OrderedJson& body, const text::ChatTemplate& chat_template,
                                     const text::Tokenizer& tokenizer);

struct ChatTurn {
  ChatPrompt prompt;
  EngineJob job;
};

// The prompt of `chat_body` and its engine job: the request's sampling
// fitted to the context (`clamp_max_tokens`: see fit_to_context), plus the
// prompt's forced tool-call opening, the output's grammar (the request's
// output format or the tool calls', from the end of the reasoning on) and,
// under --replay, the replayed output; validated against the vocabulary. Errors are the client's (400).
Result<ChatTurn> build_chat_turn(const OrderedJson& chat_body, SamplingRequest sampling, const ServerContext& ctx,
                                 bool clamp_max_tokens);

// vLLM's reasoning-token count: generated tokens before the first
// `end_token` (`</think>`); `done` remembers across calls that it was seen.
int64_t count_reasoning_tokens(const std::vector<int32_t>& ids, int32_t end_token, bool* done);

}  // namespace m2::server
