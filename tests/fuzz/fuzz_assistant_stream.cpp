// libFuzzer harness: the M2 output parsers (reasoning split, tool-call
// blocks, UTF-8 repair: text/assistant_output_parser.h) over arbitrary
// output split at arbitrary points. Input: an options byte, a byte of chunk
// sizes' seed, then the raw output.
//
// Properties (assistant_output_parser.h's contract): every delta is valid
// UTF-8; a call's arguments arrive after its header and belong to the last
// call; the concatenated deltas equal the whole-text parse (reasoning,
// content, call names, ids, arguments as JSON), except for an output cut off
// inside a call whose name was already streamed (tool_call_stream.h), where
// the calls before it still agree.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "fuzz_check.h"
#include "text/assistant_output_parser.h"

namespace m2::text {
namespace {

constexpr const char* kTools = R"([
  {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {
    "location": {"type": "string"}, "days": {"type": "integer"}, "unit": {"enum": ["c", "f"]}}}}},
  {"type": "function", "function": {"name": "run", "parameters": {"type": "object", "properties": {
    "code": {"type": "string"}, "timeout": {"type": "number"}, "env": {"type": "object"},
    "args": {"type": "array"}, "dry": {"type": "boolean"}, "n": {"type": ["integer", "null"]}}}}}
])";

struct Streamed {
  std::string reasoning, content;
  std::vector<ToolCallDelta> calls;  // one per call: id, name, arguments concatenated
};

void take(Streamed& s, AssistantDelta d) {
  FUZZ_CHECK(sanitize_utf8(d.content) == d.content, "a content delta that is not UTF-8");
  FUZZ_CHECK(sanitize_utf8(d.reasoning_content) == d.reasoning_content, "a reasoning delta that is not UTF-8");
  s.reasoning += d.reasoning_content;
  s.content += d.content;
  for (ToolCallDelta& c : d.tool_calls) {
    FUZZ_CHECK(sanitize_utf8(c.arguments) == c.arguments, "an arguments delta that is not UTF-8");
    if (!c.id.empty()) {
      FUZZ_CHECK(c.index == static_cast<int>(s.calls.size()), "call index %d, expected %zu", c.index, s.calls.size());
      s.calls.push_back(c);
      continue;
    }
    FUZZ_CHECK(!s.calls.empty() && c.index == static_cast<int>(s.calls.size()) - 1,
               "arguments for call %d before its header or after the next one", c.index);
    s.calls.back().arguments += c.arguments;
  }
}

OrderedJson as_json(const std::string& text) {
  OrderedJson j = OrderedJson::parse(text, nullptr, false);
  FUZZ_CHECK(!j.is_discarded(), "tool-call arguments that are not JSON: %s", text.c_str());
  return j;
}

void same_call(const ToolCall& whole, const ToolCallDelta& streamed) {
  FUZZ_CHECK(whole.id == streamed.id, "call id %s streamed as %s", whole.id.c_str(), streamed.id.c_str());
  FUZZ_CHECK(whole.name == streamed.name, "call %s streamed as %s", whole.name.c_str(), streamed.name.c_str());
  FUZZ_CHECK(as_json(whole.arguments) == as_json(streamed.arguments), "arguments %s streamed as %s",
             whole.arguments.c_str(), streamed.arguments.c_str());
}

}  // namespace
}  // namespace m2::text

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace m2::text;
  using m2::Json;
  using m2::OrderedJson;
  if (size < 2) return 0;
  static const Json tools = Json::parse(kTools);
  const uint8_t flags = data[0];
  uint32_t chunk_seed = data[1];
  const std::string raw(reinterpret_cast<const char*>(data + 2), size - 2);

  AssistantParseOptions options = options_from_request(Json{{"tools", tools}});
  options.reasoning = (flags & 1) ? ReasoningMode::kAppendThink : ReasoningMode::kSplit;
  options.starts_in_reasoning = !(flags & 2);
  options.parse_tool_calls = !(flags & 4);
  switch ((flags >> 3) & 3) {  // tool_choice none, a named tool, an allowed subset, every tool
    case 0: break;
    case 1: options.allowed_tools = ToolNameSet{}; break;
    case 2: options.allowed_tools = ToolNameSet{"get_weather"}; break;
    case 3: options.allowed_tools = ToolNameSet{"run", "unknown_tool"}; break;
  }
  options.id_seed = 99;
  const AssistantMessage whole = parse_assistant_output(raw, options);
  (void)assistant_message_json(whole, options.reasoning);

  // Chunks of 1 to 16 bytes from a small generator seeded by the input:
  // splits land inside tags, escapes and UTF-8 characters alike.
  AssistantStreamParser parser(options);
  Streamed s;
  for (size_t i = 0; i < raw.size();) {
    chunk_seed = chunk_seed * 1103515245u + 12345u;
    const size_t n = std::min<size_t>(raw.size() - i, 1 + ((chunk_seed >> 16) % 16));
    AssistantDelta d = parser.feed(std::string_view(raw).substr(i, n));
    (void)assistant_delta_json(d);
    take(s, std::move(d));
    i += n;
  }
  take(s, parser.finish());

  FUZZ_CHECK(whole.reasoning_content.value_or("") == s.reasoning, "reasoning differs: whole [%s] streamed [%s]",
             whole.reasoning_content.value_or("").c_str(), s.reasoning.c_str());
  FUZZ_CHECK(parser.has_tool_calls() == !s.calls.empty(), "has_tool_calls disagrees with the deltas");
  if (parser.has_incomplete_tool_call()) {
    FUZZ_CHECK(s.calls.size() == whole.tool_calls.size() + 1, "%zu calls streamed, %zu whole + the cut-off one",
               s.calls.size(), whole.tool_calls.size());
  } else {
    FUZZ_CHECK(whole.content.value_or("") == s.content, "content differs: whole [%s] streamed [%s]",
               whole.content.value_or("").c_str(), s.content.c_str());
    FUZZ_CHECK(s.calls.size() == whole.tool_calls.size(), "%zu calls streamed, %zu whole", s.calls.size(),
               whole.tool_calls.size());
  }
  for (size_t i = 0; i < whole.tool_calls.size() && i < s.calls.size(); ++i) same_call(whole.tool_calls[i], s.calls[i]);
  return 0;
}
