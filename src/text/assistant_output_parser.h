// From raw MiniMax-M2 output to the OpenAI assistant message the server
// returns, whole (parse_assistant_output) or streamed (AssistantStreamParser):
// bytes -> valid UTF-8 (utf8_sanitizer.h) -> reasoning split
// (reasoning_parser.h) -> tool calls in the text after `</think>`
// (tool_call_parser.h / tool_call_stream.h).
//
// For any split of the same output, the concatenated stream deltas give the
// same reasoning_content, content and calls (names, ids under the same seed,
// parsed arguments) as parse_assistant_output, with the one exception
// documented in tool_call_stream.h (output cut off inside a call).
//
// Message fields: `content` and `reasoning_content` are null when empty;
// `reasoning_content` is present in kSplit mode only; `tool_calls` is
// present when calls were parsed, and then the finish reason is
// "tool_calls".
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "text/reasoning_parser.h"
#include "text/tool_call_id.h"
#include "text/tool_call_parser.h"
#include "text/tool_call_stream.h"
#include "text/tool_schema.h"
#include "text/utf8_sanitizer.h"
#include "util/json.h"

namespace m2::text {

struct AssistantParseOptions {
  ReasoningMode reasoning = ReasoningMode::kSplit;
  // The prompt ended inside an open `<think>` (the template's generation
  // prompt does). False when the server closed the reasoning in the prompt.
  bool starts_in_reasoning = true;
  // False when the request has no tools or tool_choice is "none" (as vLLM):
  // tool-call blocks are then content text.
  bool parse_tool_calls = true;
  // When set, only these tools are called: an invoke of any other name is
  // parsed and dropped (tool_call_parser.h); tool_choice "none" sets the
  // empty set, so a call the model writes anyway never shows as text.
  std::optional<ToolNameSet> allowed_tools;
  ToolSchemas schemas;
  std::optional<uint64_t> id_seed;  // tool-call ids are random without it
};

// The options a chat-completions request body implies: schemas from
// `tools`, parse_tool_calls unless `tools` is empty/absent, and no allowed
// tool when `tool_choice` is "none". The caller sets the reasoning mode.
AssistantParseOptions options_from_request(const Json& request);

struct AssistantMessage {
  std::optional<std::string> content;
  std::optional<std::string> reasoning_content;  // kSplit only
  std::vector<ToolCall> tool_calls;

  // OpenAI's finish_reason when generation stopped by EOS or a stop string
  // (the server reports "length" itself when it hit max_tokens).
  const char* finish_reason() const { return tool_calls.empty() ? "stop" : "tool_calls"; }
};

AssistantMessage parse_assistant_output(std::string_view raw, const AssistantParseOptions& options);

// {"role": "assistant", "content", ["reasoning_content" (kSplit)], ["tool_calls"]}
OrderedJson assistant_message_json(const AssistantMessage& message, ReasoningMode mode);

// One streamed chunk's worth of message.
struct AssistantDelta {
  std::string reasoning_content;
  std::string content;
  std::vector<ToolCallDelta> tool_calls;

  bool empty() const { return reasoning_content.empty() && content.empty() && tool_calls.empty(); }
};

// OpenAI `choices[i].delta`: only the non-empty fields; each tool call as
// {index, [id, type: "function"], function: {[name], arguments}}.
OrderedJson assistant_delta_json(const AssistantDelta& delta);

class AssistantStreamParser {
 public:
  explicit AssistantStreamParser(AssistantParseOptions options);
  AssistantStreamParser(const AssistantStreamParser&) = delete;  // members point at each other
  AssistantStreamParser& operator=(const AssistantStreamParser&) = delete;

  // Raw output bytes as detokenized, split anywhere (even inside a character).
  AssistantDelta feed(std::string_view bytes);
  // End of the output (EOS, stop or length). Call once, last.
  AssistantDelta finish();

  bool has_tool_calls() const { return tools_.num_calls() > 0; }  // finish reason "tool_calls"
  // Calls whose `</invoke>` has been fed (dropped ones not counted).
  int num_complete_tool_calls() const { return tools_.num_complete_calls(); }
  // `</think>` has been fed (or the prompt closed the reasoning): a server
  // forcing a tool call injects `<minimax:tool_call>\n<invoke name="X">` from
  // here on, and feeds it like generated text.
  bool reasoning_ended() const { return reasoning_.reasoning_ended(); }
  // After finish(): the output ended inside a call whose name was sent.
  bool has_incomplete_tool_call() const { return tools_.has_incomplete_call(); }

 private:
  void route(ReasoningDelta&& reasoning, AssistantDelta* out);

  AssistantParseOptions options_;
  ToolCallIdGenerator ids_;
  Utf8StreamSanitizer utf8_;
  ReasoningStreamParser reasoning_;
  ToolCallStreamParser tools_;
};

}  // namespace m2::text
