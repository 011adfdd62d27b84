// libFuzzer harness: a chat template (text/jinja: lexer, parser,
// interpreter, filters, methods) parsed and rendered as the server renders
// one (ChatTemplate::from_source, render_request) over a fixed request with
// tools, a tool call and a tool result. Input: the template's source.
//
// Property: parse and render end with a string or a Status, within the
// fuzzer's time (-timeout) and memory (-rss_limit_mb) limits: a template is
// as untrusted as a request (it comes with a downloaded model), so every
// loop, recursion and output size must be bounded (jinja/interpreter.h).
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "fuzz_check.h"
#include "text/chat_template.h"

namespace {

constexpr const char* kRequest = R"({
  "messages": [
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": [{"type": "text", "text": "Weather in Paris?"}]},
    {"role": "assistant", "content": "", "reasoning_content": "Call the tool.",
     "tool_calls": [{"id": "call_1", "type": "function",
                     "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\", \"days\": 2}"}}]},
    {"role": "tool", "tool_call_id": "call_1", "content": "sunny"},
    {"role": "user", "content": "Thanks ☀"}],
  "tools": [{"type": "function", "function": {"name": "get_weather", "description": "d",
             "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}],
  "add_generation_prompt": true,
  "chat_template_kwargs": {"enable_thinking": true}
})";

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const m2::OrderedJson request = m2::OrderedJson::parse(kRequest);
  static const m2::OrderedJson tokenizer_config = {{"bos_token", "<s>"}, {"eos_token", "</s>"}};
  const std::string_view source(reinterpret_cast<const char*>(data), size);
  auto tpl = m2::text::ChatTemplate::from_source(source, "fuzz.jinja", tokenizer_config);
  if (!tpl.ok()) return 0;
  (void)tpl->render_request(request);
  return 0;
}
