// The request fields that constrain the output to a grammar, reduced to one
// ConstraintSource (engine/constraint.h), and the grammars of tool calls in
// M2's XML format. At most one output format per request:
//  - OpenAI `response_format`: {type: "text"} (none), {type: "json_object"}
//    (any JSON object), {type: "json_schema", json_schema: {name, schema,
//    [strict], [description]}};
//  - vLLM `structured_outputs`: {json | regex | choice | grammar |
//    json_object} (exactly one), and its older top-level fields
//    `guided_json`, `guided_regex`, `guided_choice`, `guided_grammar`
//    (`guided_decoding_backend` is accepted and ignored: there is one);
//  - llama.cpp `grammar` (GBNF) and `json_schema`.
// A grammar is xgrammar's EBNF, which reads GBNF (root rule `root`).
#pragma once

#include <optional>
#include <string>

#include "engine/constraint.h"
#include "server/server_context.h"
#include "server/tool_request.h"
#include "util/json.h"
#include "util/status.h"

namespace m2::server {

struct OutputFormat {
  ConstraintSource source;
  std::string field;  // the field it came from, for error messages ("response_format")
};

// nullopt: the output is free. Errors are the client's (400) and name the field.
Result<std::optional<OutputFormat>> read_output_format(const OrderedJson& body);

// The grammar of a forced tool call (tool_choice required / named, Anthropic
// any / tool), from the `</think>` on: the block's opening exactly as
// chat_prompt forces it ("\n\n<minimax:tool_call>\n"), one `<invoke
// name="T">` of a callable tool T (more than one when `tools.parallel`),
// each with the parameters of T's JSON schema (`<parameter name="k">v
// </parameter>`: v raw text for a string, JSON otherwise), then the block's
// close. nullopt when there is no forced call.
std::optional<ConstraintSource> forced_tool_call_grammar(const ToolRequest& tools);

// tool_choice auto with `strict: true` tools: text is free until the model
// opens a tool-call block; the block must then be one call of a callable
// tool whose arguments, for a strict tool, follow its schema. nullopt when
// no callable tool is strict. A `strict` that is not a boolean is a 400.
Result<std::optional<ConstraintSource>> strict_tool_call_grammar(const ToolRequest& tools);

// Compiles `source` with the server's compiler; a grammar the engine cannot
// compile is the client's error, naming `field`.
Result<std::shared_ptr<const Constraint>> compile_constraint(const ServerContext& ctx, const ConstraintSource& source,
                                                             const std::string& field);

// `s` as an EBNF string literal (quoted, escaped).
std::string ebnf_literal(const std::string& s);

}  // namespace m2::server
