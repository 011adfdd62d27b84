// Separates MiniMax-M2 reasoning from the rest of the output (spec §7).
//
// The template's generation prompt ends with "<think>\n", so the model starts
// inside its reasoning and closes it with `</think>` (usually followed by
// "\n\n"). Two modes:
//  - kSplit (vLLM `minimax_m2`): the reasoning is the text up to the first
//    `</think>`; the rest is what the tool-call parser sees. Newlines are
//    stripped from both ends of the reasoning (exactly what the template
//    strips when it re-renders a turn, so a client that sends
//    `reasoning_content` back reproduces the model's own tokens), and from
//    the start of the rest. No `</think>` at all (the output ended by EOS or
//    length inside the reasoning): everything is reasoning, as vLLM does.
//  - kAppendThink (vLLM `minimax_m2_append_think`): nothing is separated:
//    the visible text is "<think>" + the output, for clients that send the
//    content back verbatim; the text after `</think>` still goes to the
//    tool-call parser, so tool calls are parsed only after the reasoning.
// In both modes an output that itself starts with `<think>` does not get a
// second one: that tag is dropped. When the prompt did not open the
// reasoning (thinking closed by the server), the whole output is "rest".
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace m2::text {

enum class ReasoningMode { kSplit, kAppendThink };

struct ReasoningSplit {
  std::optional<std::string> reasoning;  // kSplit only; nullopt when empty
  std::string visible;                   // kAppendThink only: "<think>" + reasoning (+ "</think>")
  std::string rest;                      // text after `</think>`, for the tool-call parser
};

// Whether a prompt ends inside an open reasoning: its last message (the text
// after the last `]~b]`, M2's message start) holds a `<think>` with no
// `</think>` after it. True for the generation prompt (`]~b]ai\n<think>\n`)
// and for a continued reasoning; false once the server or a prefill closed it.
bool prompt_opens_reasoning(std::string_view prompt);

// `text` is the whole output, valid UTF-8; `starts_in_reasoning`: the prompt
// ended inside an open `<think>`.
ReasoningSplit split_reasoning(std::string_view text, ReasoningMode mode, bool starts_in_reasoning);

// What one ReasoningStreamParser::feed()/finish() produced.
struct ReasoningDelta {
  std::string reasoning;  // kSplit
  std::string visible;    // kAppendThink
  std::string rest;
};

// Streaming form of split_reasoning: for any split of the text, the
// concatenated deltas equal split_reasoning's fields. Holds back only a
// suffix that may start `</think>` (or `<think>` at the very start) and, in
// kSplit, newlines that may turn out to end the reasoning.
class ReasoningStreamParser {
 public:
  ReasoningStreamParser(ReasoningMode mode, bool starts_in_reasoning);

  // `text`: valid UTF-8 ending on a character boundary.
  void feed(std::string_view text, ReasoningDelta* out);
  void finish(ReasoningDelta* out);
  // `</think>` has been seen (or the output started after the reasoning).
  bool reasoning_ended() const { return state_ == State::kRest; }

 private:
  enum class State { kStart, kReasoning, kRest };

  void emit_reasoning(std::string_view text, ReasoningDelta* out);

  ReasoningMode mode_;
  State state_;
  std::string pending_;          // undecided input (a possible tag prefix)
  bool think_sent_ = false;      // kAppendThink: the leading "<think>" was sent
  bool reasoning_started_ = false;
  size_t held_newlines_ = 0;     // kSplit: trailing newlines of the reasoning so far
  bool strip_rest_newlines_ = false;
};

}  // namespace m2::text
