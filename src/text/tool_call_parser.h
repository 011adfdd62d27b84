// Whole-text parser of MiniMax-M2 tool calls (spec §6): finds the
// `<minimax:tool_call>` blocks in the text after `</think>` and returns the
// calls and the remaining text. The streaming counterpart is
// tool_call_stream.h; both follow the same rules, and the streamed deltas of
// any split of a text concatenate to this parser's result (tested).
//
// Rules (the ones vLLM's minimax_m2 parser leaves undefined are ours):
//  - Each complete `<invoke name=...>...</invoke>` in a block is one call, in
//    order; names in double, single or no quotes. Calls to tools the request
//    does not declare are returned too (as vLLM does), their arguments
//    typed as strings. Parameters are typed by tool_schema.h; a parameter
//    given twice keeps its first position and its last value (a Python dict).
//  - A value keeps its exact text minus the one '\n' the format adds after
//    `>` and the one before `</parameter>`; a `</parameter>` not followed by
//    `<parameter name=` or `</invoke>` (tool_call_syntax.h) belongs to it.
//  - Text outside the blocks is content, including text after the last block
//    (vLLM discards it). Spaces (' ', '\t', '\n', '\r') right before a block
//    that yields calls are dropped, and so are spaces after it that end the
//    output: "A\n<block>\nB" gives "A\nB", "A\n<block>\n" gives "A".
//  - A block that yields no call (no valid invoke before junk, an empty
//    block, or cut off before its first invoke is complete) is returned
//    as content text, unchanged. Text in a block after its last complete
//    invoke that is neither an invoke nor the closing tag ends the block
//    and is content again. A missing `</minimax:tool_call>` at the end is
//    tolerated. Text between parameters inside an invoke is ignored.
//  - An invoke cut off by the end of the text is not a call: it and what
//    follows are content text. (A streaming parser has already sent that
//    call's name; see ToolCallStreamParser::has_incomplete_call.)
//  - With a set of allowed tool names (tool_choice "none": the empty set;
//    a named choice or `allowed_tools`: those names), an invoke of any other
//    name is parsed and dropped: neither a call nor content, and it takes
//    no id. Its block still counts as a tool-call block (its text never
//    becomes content), and an invoke of such a name cut off by the end of
//    the text is dropped with everything after it.
#pragma once

#include <functional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "text/tool_call_id.h"
#include "text/tool_schema.h"

namespace m2::text {

struct ToolCall {
  std::string id;         // "call_" + 24 hex
  std::string name;
  std::string arguments;  // JSON object text, as json.dumps(ensure_ascii=False) writes it
};

struct ToolCallParseResult {
  std::string content;  // text outside tool-call blocks ("" if none)
  std::vector<ToolCall> calls;
};

// Tool names a request lets the model call (see the rules above).
using ToolNameSet = std::set<std::string, std::less<>>;

// True when `allowed` is null (every name) or holds `name`.
inline bool tool_allowed(const ToolNameSet* allowed, std::string_view name) {
  return !allowed || allowed->count(name) != 0;
}

// `text` is valid UTF-8 (see utf8_sanitizer.h). Never fails: what is not a
// well-formed call is content. `allowed` null: every name is a call.
ToolCallParseResult parse_tool_calls(std::string_view text, const ToolSchemas& schemas,
                                     ToolCallIdGenerator* ids, const ToolNameSet* allowed = nullptr);

}  // namespace m2::text
