#include "server/anthropic_request.h"

#include <cctype>

#include "server/json_fields.h"

namespace m2::server {
namespace {

// Text of a string or a list of text blocks.
Result<std::string> block_text(const OrderedJson& content, const std::string& where, const char* sep) {
  if (content.is_string()) return content.get<std::string>();
  if (!content.is_array()) return errorf("{} must be a string or a list of blocks, got {}", where, json_type(content));
  std::string out;
  for (size_t i = 0; i < content.size(); ++i) {
    const OrderedJson& b = content[i];
    if (!b.is_object() || !b.contains("type") || b["type"] != "text" || !b.contains("text") || !b["text"].is_string())
      return errorf("{}[{}] must be a text block ({{\"type\": \"text\", \"text\": ...}})", where, i);
    if (i) out += sep;
    out += b["text"].get<std::string>();
  }
  return out;
}

Status convert_user(const OrderedJson& content, const std::string& where, OrderedJson& messages) {
  if (content.is_string()) {
    messages.push_back({{"role", "user"}, {"content", content}});
    return Status();
  }
  if (!content.is_array()) return errorf("{}.content must be a string or a list of blocks", where);
  std::string text;
  bool have_text = false;
  auto flush = [&] {
    if (have_text) messages.push_back({{"role", "user"}, {"content", text}});
    text.clear();
    have_text = false;
  };
  for (size_t i = 0; i < content.size(); ++i) {
    const OrderedJson& b = content[i];
    const std::string at = where + ".content[" + std::to_string(i) + "]";
    if (!b.is_object() || !b.contains("type") || !b["type"].is_string()) return errorf("{} needs a string 'type'", at);
    const std::string type = b["type"].get<std::string>();
    if (type == "text") {
      if (!b.contains("text") || !b["text"].is_string()) return errorf("{} needs a string 'text'", at);
      if (have_text) text += "\n";
      text += b["text"].get<std::string>();
      have_text = true;
    } else if (type == "tool_result") {
      flush();
      if (!b.contains("tool_use_id") || !b["tool_use_id"].is_string())
        return errorf("{} needs a string 'tool_use_id'", at);
      std::string result;
      if (b.contains("content") && !b["content"].is_null()) {
        M2_ASSIGN_OR_RETURN(result, block_text(b["content"], at + ".content", "\n"));
      }
      auto is_error = opt_bool(b, "is_error");
      if (!is_error.ok()) return is_error.status().with_context(at);
      if (is_error->value_or(false)) result = "Error: " + result;
      messages.push_back({{"role", "tool"}, {"tool_call_id", b["tool_use_id"]}, {"content", result}});
    } else {
      return errorf("{}: block type '{}' is not supported (text and tool_result only: the model reads text)", at, type);
    }
  }
  flush();
  return Status();
}

Status convert_assistant(const OrderedJson& content, const std::string& where, const ThinkingSigner& signer,
                         OrderedJson& messages) {
  OrderedJson m = {{"role", "assistant"}};
  if (content.is_string()) {
    m["content"] = content;
    messages.push_back(std::move(m));
    return Status();
  }
  if (!content.is_array()) return errorf("{}.content must be a string or a list of blocks", where);
  std::string text, thinking;
  bool have_thinking = false;
  OrderedJson calls = OrderedJson::array();
  for (size_t i = 0; i < content.size(); ++i) {
    const OrderedJson& b = content[i];
    const std::string at = where + ".content[" + std::to_string(i) + "]";
    if (!b.is_object() || !b.contains("type") || !b["type"].is_string()) return errorf("{} needs a string 'type'", at);
    const std::string type = b["type"].get<std::string>();
    if (type == "text") {
      if (!b.contains("text") || !b["text"].is_string()) return errorf("{} needs a string 'text'", at);
      text += b["text"].get<std::string>();
    } else if (type == "thinking") {
      if (!b.contains("thinking") || !b["thinking"].is_string()) return errorf("{} needs a string 'thinking'", at);
      if (!b.contains("signature") || !b["signature"].is_string()) return errorf("{} needs a string 'signature'", at);
      if (!signer.verify(b["thinking"].get<std::string>(), b["signature"].get<std::string>()))
        return errorf("{}.signature: the thinking block is not as this server signed it (changed, or signed by "
                      "another server)", at);
      if (have_thinking) thinking += "\n";
      thinking += b["thinking"].get<std::string>();
      have_thinking = true;
    } else if (type == "redacted_thinking") {
      continue;  // opaque to us; nothing to give back to the model
    } else if (type == "tool_use") {
      if (!b.contains("id") || !b["id"].is_string() || !b.contains("name") || !b["name"].is_string())
        return errorf("{} needs string 'id' and 'name'", at);
      OrderedJson input = b.value("input", OrderedJson::object());
      if (!input.is_object()) return errorf("{}.input must be an object", at);
      calls.push_back({{"id", b["id"]},
                       {"type", "function"},
                       {"function", {{"name", b["name"]}, {"arguments", std::move(input)}}}});
    } else {
      return errorf("{}: block type '{}' is not supported in an assistant message", at, type);
    }
  }
  m["content"] = text;
  if (have_thinking) m["reasoning_content"] = thinking;
  if (!calls.empty()) m["tool_calls"] = std::move(calls);
  messages.push_back(std::move(m));
  return Status();
}

Result<OrderedJson> convert_tools(const OrderedJson& tools) {
  if (!tools.is_array()) return errorf("'tools' must be an array, got {}", json_type(tools));
  OrderedJson out = OrderedJson::array();
  for (size_t i = 0; i < tools.size(); ++i) {
    const OrderedJson& t = tools[i];
    if (!t.is_object() || !t.contains("name") || !t["name"].is_string())
      return errorf("tools[{}] needs a string 'name'", i);
    if (t.contains("type") && t["type"].is_string() && t["type"] != "custom")
      return errorf("tools[{}]: server tool type '{}' is not supported (custom tools only)", i,
                    t["type"].get<std::string>());
    if (!t.contains("input_schema") || !t["input_schema"].is_object())
      return errorf("tools[{}] needs an object 'input_schema'", i);
    OrderedJson fn = {{"name", t["name"]}};
    if (t.contains("description") && t["description"].is_string()) fn["description"] = t["description"];
    fn["parameters"] = t["input_schema"];
    if (t.contains("strict") && !t["strict"].is_null()) {  // structured outputs: the call follows input_schema
      if (!t["strict"].is_boolean()) return errorf("tools[{}].strict must be a boolean", i);
      fn["strict"] = t["strict"];
    }
    out.push_back({{"type", "function"}, {"function", std::move(fn)}});
  }
  return out;
}

Result<OrderedJson> convert_tool_choice(const OrderedJson& tc) {
  if (!tc.is_object() || !tc.contains("type") || !tc["type"].is_string())
    return errorf("'tool_choice' must be an object with a string 'type'");
  const std::string type = tc["type"].get<std::string>();
  if (type == "auto") return OrderedJson("auto");
  if (type == "any") return OrderedJson("required");
  if (type == "none") return OrderedJson("none");
  if (type == "tool") {
    if (!tc.contains("name") || !tc["name"].is_string()) return errorf("'tool_choice' of type 'tool' needs a 'name'");
    return OrderedJson{{"type", "function"}, {"function", {{"name", tc["name"]}}}};
  }
  return errorf("'tool_choice.type' must be auto, any, tool or none, got '{}'", type);
}

// `thinking` and `output_config` -> the chat body's thinking fields
// (thinking_request.h).
Status convert_thinking(const OrderedJson& body, OrderedJson& chat) {
  if (auto th = body.find("thinking"); th != body.end() && !th->is_null()) {
    if (!th->is_object() || !th->contains("type") || !(*th)["type"].is_string())
      return errorf("'thinking' must be an object with a string 'type'");
    M2_ASSIGN_OR_RETURN(std::optional<std::string> display, opt_string(*th, "display"));
    if (display && *display != "summarized") {
      return errorf("'thinking.display' '{}' is not supported (summarized only: the thinking text comes back in "
                    "history to be continued)", *display);
    }
    const std::string type = (*th)["type"].get<std::string>();
    if (type == "disabled") {
      chat["chat_template_kwargs"] = {{"enable_thinking", false}};
    } else if (type == "enabled") {
      M2_ASSIGN_OR_RETURN(std::optional<int64_t> budget, opt_int(*th, "budget_tokens"));
      if (!budget) return errorf("thinking.budget_tokens: Field required");
      if (*budget < 1) return errorf("'thinking.budget_tokens' must be at least 1, got {}", *budget);
      chat["thinking_token_budget"] = *budget;
    } else if (type != "adaptive") {
      return errorf("'thinking.type' must be enabled, disabled or adaptive, got '{}'", type);
    }
  }
  if (auto oc = body.find("output_config"); oc != body.end() && !oc->is_null()) {
    if (!oc->is_object()) return errorf("'output_config' must be an object, got {}", json_type(*oc));
    if (oc->contains("format") && !(*oc)["format"].is_null()) {
      // Structured outputs: {type: "json_schema", schema} -> OpenAI's response_format.
      const OrderedJson& f = (*oc)["format"];
      if (!f.is_object() || !f.contains("type") || f["type"] != "json_schema")
        return errorf("'output_config.format' must be an object with type 'json_schema'");
      if (!f.contains("schema") || !f["schema"].is_object())
        return errorf("'output_config.format.schema' must be an object (a JSON schema)");
      chat["response_format"] = {{"type", "json_schema"}, {"json_schema", {{"name", "output"}, {"schema", f["schema"]}}}};
    }
    M2_ASSIGN_OR_RETURN(std::optional<std::string> effort, opt_string(*oc, "effort"));
    if (effort) {
      if (*effort != "low" && *effort != "medium" && *effort != "high" && *effort != "xhigh" && *effort != "max")
        return errorf("'output_config.effort' must be low, medium, high, xhigh or max, got '{}'", *effort);
      chat["reasoning_effort"] = *effort;
    }
  }
  return Status();
}

}  // namespace

Result<AnthropicRequest> parse_anthropic_request(const OrderedJson& body, const SamplingParams& defaults,
                                                 const ThinkingSigner& signer, bool count_tokens_only) {
  if (!body.is_object()) return errorf("the request body must be a JSON object");
  AnthropicRequest out;
  OrderedJson messages = OrderedJson::array();
  bool prefill = false;
  if (auto sys = body.find("system"); sys != body.end() && !sys->is_null()) {
    M2_ASSIGN_OR_RETURN(std::string system, block_text(*sys, "system", "\n"));
    messages.push_back({{"role", "system"}, {"content", system}});
  }
  auto msgs = body.find("messages");
  if (msgs == body.end()) return errorf("messages: Field required");
  if (!msgs->is_array()) return errorf("'messages' must be an array, got {}", json_type(*msgs));
  if (msgs->empty()) return errorf("'messages' must not be empty");
  for (size_t i = 0; i < msgs->size(); ++i) {
    const OrderedJson& m = (*msgs)[i];
    const std::string where = "messages[" + std::to_string(i) + "]";
    if (!m.is_object() || !m.contains("role") || !m["role"].is_string())
      return errorf("{} needs a string 'role'", where);
    if (!m.contains("content")) return errorf("{} needs 'content'", where);
    const std::string role = m["role"].get<std::string>();
    if (role == "user") {
      M2_RETURN_IF_ERROR(convert_user(m["content"], where, messages));
    } else if (role == "assistant") {
      M2_RETURN_IF_ERROR(convert_assistant(m["content"], where, signer, messages));
    } else {
      return errorf("{}.role '{}' is unknown (user, assistant)", where, role);
    }
  }
  // A final assistant message is a prefill: the reply continues it. An empty
  // one asks for nothing (Anthropic allows it): the reply is a new turn.
  if ((*msgs).back()["role"] == "assistant") {
    const OrderedJson& last = messages.back();
    const std::string text = last.value("content", "");
    if (text.empty() && !last.contains("reasoning_content") && !last.contains("tool_calls")) {
      messages.erase(messages.size() - 1);
    } else {
      if (!text.empty() && std::isspace(static_cast<unsigned char>(text.back())))
        return errorf("messages[{}]: final assistant content cannot end with trailing whitespace", msgs->size() - 1);
      prefill = true;
    }
  }
  out.chat_body = {{"messages", std::move(messages)}};
  if (prefill) out.chat_body["continue_final_message"] = true;
  if (auto t = body.find("tools"); t != body.end() && !t->is_null()) {
    M2_ASSIGN_OR_RETURN(out.chat_body["tools"], convert_tools(*t));
  }
  if (auto tc = body.find("tool_choice"); tc != body.end() && !tc->is_null()) {
    M2_ASSIGN_OR_RETURN(out.chat_body["tool_choice"], convert_tool_choice(*tc));
    auto one = opt_bool(*tc, "disable_parallel_tool_use");
    if (!one.ok()) return one.status().with_context("tool_choice");
    if (one->value_or(false)) out.chat_body["parallel_tool_calls"] = false;
  }
  M2_RETURN_IF_ERROR(convert_thinking(body, out.chat_body));
  if (count_tokens_only) return out;

  auto stream = opt_bool(body, "stream");
  if (!stream.ok()) return stream.status();
  out.stream = stream->value_or(false);
  auto max_tokens = opt_int(body, "max_tokens");
  if (!max_tokens.ok()) return max_tokens.status();
  if (!*max_tokens) return errorf("max_tokens: Field required");
  // The sampling fields under their OpenAI names, checked by the same code.
  OrderedJson s = OrderedJson::object();
  s["max_tokens"] = **max_tokens;
  for (const char* key : {"temperature", "top_p", "top_k"})
    if (body.contains(key)) s[key] = body[key];
  if (body.contains("stop_sequences")) {
    if (!body["stop_sequences"].is_null() && !body["stop_sequences"].is_array())
      return errorf("'stop_sequences' must be a list of strings");
    s["stop"] = body["stop_sequences"];
  }
  M2_ASSIGN_OR_RETURN(out.sampling, parse_sampling_request(s, defaults, LogprobsStyle::kChat));
  return out;
}

}  // namespace m2::server
