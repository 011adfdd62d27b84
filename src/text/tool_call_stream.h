// Streaming parser of MiniMax-M2 tool calls: fed the text after `</think>`
// in pieces split anywhere (inside tags, escapes or between any two
// characters), it returns OpenAI-style deltas as soon as they are decided:
//  - content, holding back only a suffix that may still start
//    `<minimax:tool_call>`, and spaces that may still precede a block or
//    end the output after one;
//  - for each call, first {index, id, name} with arguments "{" once
//    `<invoke name="...">` is complete, then the arguments JSON text as the
//    model writes it: `"key": ` when `<parameter name="key">` is complete;
//    a string-typed value character by character (JSON-escaped, holding
//    back only a possible closing `</parameter>`, the newline before it, and
//    text that may still be a null word, such as " nul"); any other value once its
//    `</parameter>` is confirmed (its JSON depends on the whole text: "12x"
//    is not an integer); "}" at `</invoke>`.
// The rules are those of tool_call_parser.h. The concatenated deltas give the
// same content, names, ids (same generator seed) and arguments as
// parse_tool_calls on the whole text; the arguments text is identical except
// that a parameter given twice appears twice (JSON parsers keep the last,
// the value parse_tool_calls keeps). One difference cannot be avoided: when
// the text ends inside an invoke whose name was sent, that call stays
// unfinished (has_incomplete_call()) where parse_tool_calls returns the text.
//
// With a set of allowed names, an invoke of another name is consumed
// silently from its header on (the rules of tool_call_parser.h).
//
// Text forced into the output by the server (e.g. `<minimax:tool_call>\n
// <invoke name="X">` for tool_choice "required"/named) is fed like
// generated text.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "text/tool_call_id.h"
#include "text/tool_call_parser.h"
#include "text/tool_schema.h"

namespace m2::text {

// One piece of one tool call, as in OpenAI's `delta.tool_calls[i]`.
struct ToolCallDelta {
  int index = 0;          // position of the call in the message
  std::string id;         // set on the call's first delta only
  std::string name;       // set on the call's first delta only
  std::string arguments;  // next piece of the arguments JSON text
};

// What one feed() or finish() produced; pieces of one call are merged.
struct ToolStreamDelta {
  std::string content;
  std::vector<ToolCallDelta> tool_calls;

  void append_arguments(int index, std::string_view text);
};

class ToolCallStreamParser {
 public:
  // `schemas`, `ids` and `allowed` (null: every name) must outlive the parser.
  ToolCallStreamParser(const ToolSchemas* schemas, ToolCallIdGenerator* ids, const ToolNameSet* allowed = nullptr);

  // `text` is valid UTF-8 ending on a character boundary (utf8_sanitizer.h).
  void feed(std::string_view text, ToolStreamDelta* out);
  // End of the output: flushes held text. Call once, last.
  void finish(ToolStreamDelta* out);

  int num_calls() const { return call_index_ + 1; }  // calls whose name was sent
  int num_complete_calls() const { return complete_calls_; }  // calls whose `</invoke>` was read
  // After finish(): the text ended inside an invoke whose name was sent.
  bool has_incomplete_call() const { return incomplete_; }

 private:
  enum class State { kContent, kBlock, kInvokeHeader, kInvokeBody, kParamHeader, kValue };

  // Each step consumes what it can decide from the unconsumed input; false
  // when it needs more text.
  bool step(ToolStreamDelta* out);
  bool step_content(ToolStreamDelta* out);
  bool step_block(ToolStreamDelta* out);
  bool step_invoke_header(ToolStreamDelta* out);
  bool step_invoke_body(ToolStreamDelta* out);
  bool step_param_header(ToolStreamDelta* out);
  bool step_value(ToolStreamDelta* out);

  std::string_view rest() const { return std::string_view(pending_).substr(pos_); }
  void consume(size_t n) { pos_ += n; }
  // Content text that may be followed by a block: its trailing spaces are held.
  void emit_content(std::string_view text, ToolStreamDelta* out);
  // The open block turned out to yield no call: its opening tag becomes
  // content and the text after it is scanned again as content.
  void block_is_text(ToolStreamDelta* out);
  // Appends to the current call's arguments, unless the call is dropped.
  void emit_arguments(std::string_view text, ToolStreamDelta* out);
  void append_value(std::string_view text, ToolStreamDelta* out);
  void finish_value(ToolStreamDelta* out);

  const ToolSchemas* schemas_;
  ToolCallIdGenerator* ids_;
  const ToolNameSet* allowed_;
  std::string pending_;  // input not yet consumed starts at pos_
  size_t pos_ = 0;
  State state_ = State::kContent;

  std::string held_space_;   // trailing spaces of content, sent or dropped later
  bool after_block_ = false;  // only spaces since a block with calls closed
  std::string held_block_;   // text of an open block that has no call yet
  bool block_has_calls_ = false;

  int call_index_ = -1;
  std::string call_name_;
  int params_in_call_ = 0;
  bool dropping_ = false;  // the current invoke's name is not allowed
  int complete_calls_ = 0;
  bool incomplete_ = false;

  // The parameter value being read.
  ParamTypes value_types_;
  bool value_started_ = false;  // past the optional '\n' after `>`
  bool value_as_string_ = false;
  std::string value_text_;      // held value text (whole value unless streamed as a string)
  bool quote_open_ = false;     // the string value is being sent
  // Where a held string value is in "spaces, null word, spaces".
  enum class NullPhase { kLeadingSpace, kWord, kTrailingSpace } null_phase_ = NullPhase::kLeadingSpace;
  std::string null_word_;       // its letters so far, lowercased
};

}  // namespace m2::text
