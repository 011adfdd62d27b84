// The tool fields of an OpenAI chat-completions body, checked and reduced to
// what the prompt, the engine and the parsers need:
//  - `tools` ([{type: "function", function: {name, [description],
//    [parameters]}}]) or the legacy `functions` ([{name, ...}], each becomes
//    a tool; both at once is an error);
//  - `tool_choice`: "none" | "auto" | "required" | {type: "function",
//    function: {name}} | {type: "allowed_tools", allowed_tools: {mode: "auto"
//    | "required", tools: [{type: "function", function: {name}}]}}; or the
//    legacy `function_call`: "none" | "auto" | {name};
//  - `parallel_tool_calls` (default true; the legacy fields imply false:
//    that API returns one `function_call`).
// What each choice does:
//  - none: the tools are not rendered into the prompt, and a call the model
//    writes anyway is parsed and dropped (no tool is allowed);
//  - auto: every tool rendered, every call returned;
//  - required: the tool-call block is forced open once the reasoning ends;
//  - named: the same with `<invoke name="X">`; only X is allowed;
//  - allowed_tools: only those tools are rendered and allowed; mode
//    "required" forces the block as for required.
#pragma once

#include <optional>
#include <string>

#include "text/tool_call_parser.h"
#include "util/json.h"
#include "util/status.h"

namespace m2::server {

struct ToolRequest {
  enum class Choice { kNone, kAuto, kRequired, kNamed };

  OrderedJson tools = OrderedJson::array();  // every declared tool, OpenAI form (the parsers' schemas)
  OrderedJson rendered;                      // the tools the prompt shows: null when none
  Choice choice = Choice::kNone;
  std::string forced_name;                   // kNamed
  std::optional<text::ToolNameSet> allowed;  // unset: every tool may be called
  bool parallel = true;                      // false: generation ends after the first complete call
  bool legacy_functions = false;             // answer `function_call` instead of `tool_calls`
};

// Errors are the client's (400) and name the field.
Result<ToolRequest> parse_tool_request(const OrderedJson& body);

}  // namespace m2::server
