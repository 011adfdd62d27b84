// The output of one /v1/responses generation as Responses items, built
// from the streaming assistant parser's deltas: a `reasoning` item (M2's
// <think> text as reasoning_text content, and as a summary_text part too
// when the request asked for a summary: there is no summariser, the summary
// is the reasoning itself; and sealed as `encrypted_content` when the
// request included it), a `message` item (output_text), and one
// `function_call` item per tool call, in the order the model wrote them.
// Each change is also reported as the stream events of the Responses API
// (response.output_item.added, content_part.added, output_text.delta, ...),
// handed to a sink that numbers and writes them; a whole (non-streamed)
// response builds the same items with no sink.
#pragma once

#include <functional>
#include <string>

#include "server/thinking_signature.h"
#include "text/assistant_output_parser.h"
#include "util/json.h"

namespace m2::server {

class ResponsesOutput {
 public:
  // `sink(event)`: one event without its sequence_number (null: no events).
  using Sink = std::function<void(OrderedJson event)>;
  // `sealer`: set when the request included reasoning.encrypted_content.
  ResponsesOutput(bool summary, const ThinkingSigner* sealer, Sink sink)
      : summary_(summary), sealer_(sealer), sink_(std::move(sink)) {}

  void add(const text::AssistantDelta& delta);
  // The output ended; `incomplete`: by max_output_tokens (the open item is
  // then marked incomplete).
  void finish(bool incomplete);

  const OrderedJson& items() const { return items_; }
  bool has_function_calls() const { return calls_ > 0; }
  // The items as the chat assistant message the next turn's prompt renders:
  // {role: assistant, content, [reasoning_content], [tool_calls]}.
  OrderedJson chat_message() const;

 private:
  enum class Open { kNone, kReasoning, kMessage, kCall };
  void open(Open kind, OrderedJson item);
  void close(const char* status);
  void emit(const char* type, OrderedJson fields);
  OrderedJson& current() { return items_.back(); }
  OrderedJson where() const;  // {item_id, output_index}

  const bool summary_;
  const ThinkingSigner* sealer_;
  Sink sink_;
  OrderedJson items_ = OrderedJson::array();
  Open open_ = Open::kNone;
  std::string text_;  // the open item's text (reasoning, message or arguments)
  int calls_ = 0;
};

}  // namespace m2::server
