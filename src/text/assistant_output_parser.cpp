#include "text/assistant_output_parser.h"

namespace m2::text {
namespace {

std::optional<std::string> non_empty(std::string s) {
  if (s.empty()) return std::nullopt;
  return s;
}

OrderedJson optional_string_json(const std::optional<std::string>& s) {
  return s ? OrderedJson(*s) : OrderedJson(nullptr);
}

}  // namespace

AssistantParseOptions options_from_request(const Json& request) {
  AssistantParseOptions options;
  const Json tools = request.is_object() ? request.value("tools", Json()) : Json();
  options.schemas = ToolSchemas::from_request_tools(tools);
  const bool has_tools = tools.is_array() && !tools.empty();
  const bool choice_none = request.is_object() && request.contains("tool_choice") &&
                           request["tool_choice"].is_string() && request["tool_choice"] == "none";
  options.parse_tool_calls = has_tools;
  if (choice_none) options.allowed_tools.emplace();
  return options;
}

AssistantMessage parse_assistant_output(std::string_view raw, const AssistantParseOptions& options) {
  const std::string text = sanitize_utf8(raw);
  ReasoningSplit split = split_reasoning(text, options.reasoning, options.starts_in_reasoning);
  AssistantMessage message;
  message.reasoning_content = std::move(split.reasoning);
  std::string content = std::move(split.visible);
  if (options.parse_tool_calls) {
    ToolCallIdGenerator ids(options.id_seed);
    const ToolNameSet* allowed = options.allowed_tools ? &*options.allowed_tools : nullptr;
    ToolCallParseResult parsed = parse_tool_calls(split.rest, options.schemas, &ids, allowed);
    content.append(parsed.content);
    message.tool_calls = std::move(parsed.calls);
  } else {
    content.append(split.rest);
  }
  message.content = non_empty(std::move(content));
  return message;
}

OrderedJson assistant_message_json(const AssistantMessage& message, ReasoningMode mode) {
  OrderedJson j = OrderedJson::object();
  j["role"] = "assistant";
  j["content"] = optional_string_json(message.content);
  if (mode == ReasoningMode::kSplit) j["reasoning_content"] = optional_string_json(message.reasoning_content);
  if (!message.tool_calls.empty()) {
    OrderedJson calls = OrderedJson::array();
    for (const ToolCall& call : message.tool_calls) {
      calls.push_back({{"id", call.id},
                       {"type", "function"},
                       {"function", {{"name", call.name}, {"arguments", call.arguments}}}});
    }
    j["tool_calls"] = std::move(calls);
  }
  return j;
}

OrderedJson assistant_delta_json(const AssistantDelta& delta) {
  OrderedJson j = OrderedJson::object();
  if (!delta.reasoning_content.empty()) j["reasoning_content"] = delta.reasoning_content;
  if (!delta.content.empty()) j["content"] = delta.content;
  if (!delta.tool_calls.empty()) {
    OrderedJson calls = OrderedJson::array();
    for (const ToolCallDelta& call : delta.tool_calls) {
      OrderedJson c = OrderedJson::object();
      c["index"] = call.index;
      OrderedJson fn = OrderedJson::object();
      if (!call.id.empty()) {
        c["id"] = call.id;
        c["type"] = "function";
        fn["name"] = call.name;
      }
      fn["arguments"] = call.arguments;
      c["function"] = std::move(fn);
      calls.push_back(std::move(c));
    }
    j["tool_calls"] = std::move(calls);
  }
  return j;
}

AssistantStreamParser::AssistantStreamParser(AssistantParseOptions options)
    : options_(std::move(options)),
      ids_(options_.id_seed),
      reasoning_(options_.reasoning, options_.starts_in_reasoning),
      tools_(&options_.schemas, &ids_, options_.allowed_tools ? &*options_.allowed_tools : nullptr) {}

void AssistantStreamParser::route(ReasoningDelta&& reasoning, AssistantDelta* out) {
  out->reasoning_content.append(reasoning.reasoning);
  out->content.append(reasoning.visible);
  if (reasoning.rest.empty()) return;
  if (!options_.parse_tool_calls) {
    out->content.append(reasoning.rest);
    return;
  }
  ToolStreamDelta tools;
  tools_.feed(reasoning.rest, &tools);
  out->content.append(tools.content);
  out->tool_calls = std::move(tools.tool_calls);
}

AssistantDelta AssistantStreamParser::feed(std::string_view bytes) {
  AssistantDelta out;
  ReasoningDelta reasoning;
  reasoning_.feed(utf8_.feed(bytes), &reasoning);
  route(std::move(reasoning), &out);
  return out;
}

AssistantDelta AssistantStreamParser::finish() {
  AssistantDelta out;
  ReasoningDelta reasoning;
  reasoning_.feed(utf8_.finish(), &reasoning);
  reasoning_.finish(&reasoning);
  route(std::move(reasoning), &out);
  if (options_.parse_tool_calls) {
    ToolStreamDelta tools;
    tools_.finish(&tools);
    out.content.append(tools.content);
    for (ToolCallDelta& call : tools.tool_calls) out.tool_calls.push_back(std::move(call));
  }
  return out;
}

}  // namespace m2::text
