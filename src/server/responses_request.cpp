#include "server/responses_request.h"

#include "server/json_fields.h"

namespace m2::server {
namespace {

std::string at(const std::string& where, size_t i) { return where + "[" + std::to_string(i) + "]"; }

// A required string member of an object.
Result<std::string> need_string(const OrderedJson& obj, const char* key, const std::string& where) {
  auto it = obj.find(key);
  if (it == obj.end() || !it->is_string()) return errorf("'{}.{}' must be a string", where, key);
  return it->get<std::string>();
}

// A message's content (string or parts) -> chat text parts. User-side parts
// are input_text, assistant-side output_text (refusal text too); images,
// files and audio are refused: the model reads text.
Result<OrderedJson> content_parts(const OrderedJson& content, const std::string& where) {
  if (content.is_string()) return OrderedJson::array({{{"type", "text"}, {"text", content}}});
  if (!content.is_array())
    return errorf("'{}' must be a string or an array of parts, got {}", where, json_type(content));
  OrderedJson parts = OrderedJson::array();
  for (size_t i = 0; i < content.size(); ++i) {
    const OrderedJson& p = content[i];
    const std::string w = at(where, i);
    if (!p.is_object()) return errorf("'{}' must be an object, got {}", w, json_type(p));
    M2_ASSIGN_OR_RETURN(std::string type, need_string(p, "type", w));
    if (type == "input_text" || type == "output_text" || type == "text") {
      M2_ASSIGN_OR_RETURN(std::string text, need_string(p, "text", w));
      parts.push_back({{"type", "text"}, {"text", std::move(text)}});
    } else if (type == "refusal") {
      M2_ASSIGN_OR_RETURN(std::string text, need_string(p, "refusal", w));
      parts.push_back({{"type", "text"}, {"text", std::move(text)}});
    } else {
      return errorf("'{}.type' '{}' is not supported (input_text, output_text; the model reads text only)", w, type);
    }
  }
  return parts;
}

// The text of a reasoning item: its encrypted_content (this server's seal),
// else its reasoning_text content, else its summary.
Result<std::string> reasoning_text(const OrderedJson& item, const std::string& where, const ThinkingSigner& signer) {
  if (auto e = item.find("encrypted_content"); e != item.end() && !e->is_null()) {
    if (!e->is_string()) return errorf("'{}.encrypted_content' must be a string, got {}", where, json_type(*e));
    std::optional<std::string> text = signer.unseal(e->get<std::string>());
    if (!text) return errorf("'{}.encrypted_content' was not produced by this server (or was altered)", where);
    return *text;
  }
  std::string text;
  for (const char* key : {"content", "summary"}) {
    auto it = item.find(key);
    if (it == item.end() || it->is_null()) continue;
    if (!it->is_array()) return errorf("'{}.{}' must be an array, got {}", where, key, json_type(*it));
    for (size_t i = 0; i < it->size(); ++i) {
      const OrderedJson& p = (*it)[i];
      if (!p.is_object()) return errorf("'{}' must be an object", at(where + "." + key, i));
      M2_ASSIGN_OR_RETURN(std::string t, need_string(p, "text", at(where + "." + key, i)));
      text += t;
    }
    if (!text.empty()) return text;
  }
  return text;
}

// Input items -> chat messages. Consecutive assistant-side items (reasoning,
// the assistant message, its function calls, in the order this server
// writes them) are one assistant turn.
class ItemConverter {
 public:
  explicit ItemConverter(const ThinkingSigner& signer) : signer_(signer) {}
  Status add(const OrderedJson& item, const std::string& where) {
    if (!item.is_object()) return errorf("'{}' must be an object, got {}", where, json_type(item));
    std::string type = "message";  // EasyInputMessage: {role, content} without a type
    if (auto t = item.find("type"); t != item.end()) {
      if (!t->is_string()) return errorf("'{}.type' must be a string", where);
      type = t->get<std::string>();
    }
    if (type == "message") return add_message(item, where);
    if (type == "reasoning") {
      M2_ASSIGN_OR_RETURN(std::string text, reasoning_text(item, where, signer_));
      OrderedJson& a = assistant(/*fresh=*/true);
      a["reasoning_content"] = a.value("reasoning_content", std::string()) + text;
      return Status();
    }
    if (type == "function_call") {
      M2_ASSIGN_OR_RETURN(std::string call_id, need_string(item, "call_id", where));
      M2_ASSIGN_OR_RETURN(std::string name, need_string(item, "name", where));
      M2_ASSIGN_OR_RETURN(std::string arguments, need_string(item, "arguments", where));
      OrderedJson& a = assistant(false);
      if (!a.contains("tool_calls")) a["tool_calls"] = OrderedJson::array();
      a["tool_calls"].push_back(
          {{"id", call_id}, {"type", "function"}, {"function", {{"name", name}, {"arguments", arguments}}}});
      return Status();
    }
    if (type == "function_call_output") {
      M2_ASSIGN_OR_RETURN(std::string call_id, need_string(item, "call_id", where));
      auto out = item.find("output");
      if (out == item.end()) return errorf("'{}.output' is required", where);
      M2_ASSIGN_OR_RETURN(OrderedJson parts, content_parts(*out, where + ".output"));
      close();
      messages_.push_back({{"role", "tool"}, {"tool_call_id", call_id}, {"content", std::move(parts)}});
      return Status();
    }
    return errorf("'{}.type' '{}' is not supported (message, reasoning, function_call, function_call_output)", where,
                  type);
  }

  OrderedJson take() {
    close();
    return std::move(messages_);
  }

 private:
  Status add_message(const OrderedJson& item, const std::string& where) {
    M2_ASSIGN_OR_RETURN(std::string role, need_string(item, "role", where));
    if (role != "user" && role != "assistant" && role != "system" && role != "developer")
      return errorf("'{}.role' '{}' is unknown (user, assistant, system, developer)", where, role);
    auto content = item.find("content");
    if (content == item.end()) return errorf("'{}.content' is required", where);
    M2_ASSIGN_OR_RETURN(OrderedJson parts, content_parts(*content, where + ".content"));
    if (role == "assistant") {
      OrderedJson& a = assistant(false);
      // A second assistant message (or one after the turn's calls) is a new turn.
      if (a.contains("content") || a.contains("tool_calls")) close(), assistant(false);
      open_["content"] = std::move(parts);
      return Status();
    }
    close();
    messages_.push_back({{"role", role}, {"content", std::move(parts)}});
    return Status();
  }

  // The assistant turn being assembled; `fresh`: a reasoning item starts a
  // new turn unless the open one has nothing yet.
  OrderedJson& assistant(bool fresh) {
    if (fresh && !open_.is_null() && open_.size() > 1) close();
    if (open_.is_null()) open_ = {{"role", "assistant"}};
    return open_;
  }

  void close() {
    if (open_.is_null()) return;
    if (!open_.contains("content")) open_["content"] = "";
    messages_.push_back(std::move(open_));
    open_ = nullptr;
  }

  const ThinkingSigner& signer_;
  OrderedJson messages_ = OrderedJson::array();
  OrderedJson open_;
};

// Responses tools -> chat tools: function tools only.
Result<OrderedJson> convert_tools(const OrderedJson& tools) {
  if (!tools.is_array()) return errorf("'tools' must be an array, got {}", json_type(tools));
  OrderedJson out = OrderedJson::array();
  for (size_t i = 0; i < tools.size(); ++i) {
    const OrderedJson& t = tools[i];
    const std::string where = at("tools", i);
    if (!t.is_object()) return errorf("'{}' must be an object, got {}", where, json_type(t));
    M2_ASSIGN_OR_RETURN(std::string type, need_string(t, "type", where));
    if (type != "function")
      return errorf("'{}.type' '{}' is not supported (function tools only: this server runs no hosted tools)", where,
                    type);
    M2_ASSIGN_OR_RETURN(std::string name, need_string(t, "name", where));
    OrderedJson fn = {{"name", name}};
    if (auto d = t.find("description"); d != t.end() && !d->is_null()) fn["description"] = *d;
    if (auto p = t.find("parameters"); p != t.end() && !p->is_null()) fn["parameters"] = *p;
    if (auto s = t.find("strict"); s != t.end() && !s->is_null()) fn["strict"] = *s;
    out.push_back({{"type", "function"}, {"function", std::move(fn)}});
  }
  return out;
}

Result<OrderedJson> convert_tool_choice(const OrderedJson& choice) {
  if (choice.is_string()) return choice;  // none / auto / required: checked by tool_request
  if (!choice.is_object()) return errorf("'tool_choice' must be a string or an object, got {}", json_type(choice));
  M2_ASSIGN_OR_RETURN(std::string type, need_string(choice, "type", "tool_choice"));
  if (type == "function") {
    M2_ASSIGN_OR_RETURN(std::string name, need_string(choice, "name", "tool_choice"));
    return OrderedJson{{"type", "function"}, {"function", {{"name", name}}}};
  }
  if (type == "allowed_tools") {
    M2_ASSIGN_OR_RETURN(std::string mode, need_string(choice, "mode", "tool_choice"));
    auto tools = choice.find("tools");
    if (tools == choice.end() || !tools->is_array()) return errorf("'tool_choice.tools' must be an array");
    OrderedJson list = OrderedJson::array();
    for (size_t i = 0; i < tools->size(); ++i) {
      const OrderedJson& t = (*tools)[i];
      if (!t.is_object()) return errorf("'{}' must be an object", at("tool_choice.tools", i));
      M2_ASSIGN_OR_RETURN(std::string name, need_string(t, "name", at("tool_choice.tools", i)));
      list.push_back({{"type", "function"}, {"function", {{"name", name}}}});
    }
    return OrderedJson{{"type", "allowed_tools"}, {"allowed_tools", {{"mode", mode}, {"tools", std::move(list)}}}};
  }
  return errorf("'tool_choice.type' '{}' is not supported (function, allowed_tools; no hosted tools)", type);
}

// text.format -> chat response_format (the chat path decides what it serves).
Result<OrderedJson> convert_text_format(const OrderedJson& text) {
  if (!text.is_object()) return errorf("'text' must be an object, got {}", json_type(text));
  auto f = text.find("format");
  if (f == text.end() || f->is_null()) return OrderedJson();
  if (!f->is_object()) return errorf("'text.format' must be an object, got {}", json_type(*f));
  M2_ASSIGN_OR_RETURN(std::string type, need_string(*f, "type", "text.format"));
  if (type != "json_schema") return OrderedJson{{"type", type}};
  OrderedJson schema = OrderedJson::object();
  for (const char* key : {"name", "schema", "strict", "description"})
    if (auto it = f->find(key); it != f->end()) schema[key] = *it;
  return OrderedJson{{"type", "json_schema"}, {"json_schema", std::move(schema)}};
}

bool given(const OrderedJson& body, const char* key) {
  auto it = body.find(key);
  return it != body.end() && !it->is_null();
}

}  // namespace

Result<std::string> previous_response_id(const OrderedJson& body) {
  M2_ASSIGN_OR_RETURN(std::optional<std::string> id, opt_string(body, "previous_response_id"));
  return id.value_or("");
}

Result<ResponsesRequest> parse_responses_request(const OrderedJson& body, const SamplingParams& defaults,
                                                 const OrderedJson& previous, const ThinkingSigner& signer) {
  ResponsesRequest r;
  // Refused: what this server does not do, rather than a silent difference.
  if (auto bg = opt_bool(body, "background"); !bg.ok()) {
    return bg.status();
  } else if (bg->value_or(false)) {
    return errorf("'background': true is not supported (responses run while the request is open; stream instead)");
  }
  for (const char* key : {"conversation", "prompt"})
    if (given(body, key)) return errorf("'{}' is not supported (use previous_response_id or input)", key);
  if (auto t = opt_string(body, "truncation"); !t.ok()) {
    return t.status();
  } else if (*t && **t != "disabled") {
    return errorf("'truncation' '{}' is not supported (only 'disabled': an input too long for the context is a 400)",
                  **t);
  }
  if (auto k = opt_int(body, "top_logprobs"); !k.ok()) {
    return k.status();
  } else if (*k && **k != 0) {
    return errorf("'top_logprobs' is not supported by /v1/responses (use /v1/chat/completions)");
  }
  M2_ASSIGN_OR_RETURN(std::optional<bool> stream, opt_bool(body, "stream"));
  M2_ASSIGN_OR_RETURN(std::optional<bool> store, opt_bool(body, "store"));
  r.stream = stream.value_or(false);
  r.store = store.value_or(true);
  if (given(body, "include")) {
    if (!body["include"].is_array()) return errorf("'include' must be an array of strings");
    for (const auto& v : body["include"]) {
      if (!v.is_string()) return errorf("'include' must be an array of strings");
      if (v == "reasoning.encrypted_content") r.encrypted_reasoning = true;
    }
  }
  if (given(body, "metadata") && !body["metadata"].is_object()) return errorf("'metadata' must be an object");

  // The conversation: instructions, the stored turns, this input.
  OrderedJson messages = OrderedJson::array();
  M2_ASSIGN_OR_RETURN(std::optional<std::string> instructions, opt_string(body, "instructions"));
  if (instructions) messages.push_back({{"role", "system"}, {"content", *instructions}});
  if (previous.is_array())
    for (const auto& m : previous) messages.push_back(m);
  auto input = body.find("input");
  if (input == body.end() || input->is_null()) return errorf("'input' is required");
  r.input_items = OrderedJson::array();
  if (input->is_string()) {
    r.new_messages = OrderedJson::array({{{"role", "user"}, {"content", *input}}});
    r.input_items.push_back({{"type", "message"},
                             {"role", "user"},
                             {"content", OrderedJson::array({{{"type", "input_text"}, {"text", *input}}})}});
  } else if (input->is_array()) {
    if (input->empty()) return errorf("'input' must not be empty");
    ItemConverter converter(signer);
    for (size_t i = 0; i < input->size(); ++i) {
      M2_RETURN_IF_ERROR(converter.add((*input)[i], at("input", i)));
      r.input_items.push_back((*input)[i]);
    }
    r.new_messages = converter.take();
  } else {
    return errorf("'input' must be a string or an array of items, got {}", json_type(*input));
  }
  // Stored as OpenAI lists them: typed, with ids, message content as parts.
  for (auto& item : r.input_items) {
    if (!item.contains("type")) item["type"] = "message";
    if (item["type"] == "message" && item["content"].is_string()) {
      const char* part = item["role"] == "assistant" ? "output_text" : "input_text";
      item["content"] = OrderedJson::array({{{"type", part}, {"text", item["content"]}}});
    }
    if (!item.contains("id")) item["id"] = (item["type"] == "message" ? "msg_" : "item_") + random_hex(12);
  }
  for (const auto& m : r.new_messages) messages.push_back(m);

  OrderedJson& chat = r.chat_body;
  chat = OrderedJson::object();
  chat["messages"] = std::move(messages);
  if (given(body, "tools")) {
    M2_ASSIGN_OR_RETURN(chat["tools"], convert_tools(body["tools"]));
  }
  if (given(body, "tool_choice")) {
    M2_ASSIGN_OR_RETURN(chat["tool_choice"], convert_tool_choice(body["tool_choice"]));
  }
  if (given(body, "parallel_tool_calls")) chat["parallel_tool_calls"] = body["parallel_tool_calls"];
  if (given(body, "reasoning")) {
    const OrderedJson& reasoning = body["reasoning"];
    if (!reasoning.is_object()) return errorf("'reasoning' must be an object, got {}", json_type(reasoning));
    M2_ASSIGN_OR_RETURN(std::optional<std::string> effort, opt_string(reasoning, "effort"));
    M2_ASSIGN_OR_RETURN(std::optional<std::string> summary, opt_string(reasoning, "summary"));
    if (effort) chat["reasoning_effort"] = *effort;
    if (summary && *summary != "auto" && *summary != "concise" && *summary != "detailed")
      return errorf("'reasoning.summary' must be 'auto', 'concise' or 'detailed', got '{}'", *summary);
    r.summary = summary.has_value();
  }
  if (given(body, "text")) {
    M2_ASSIGN_OR_RETURN(OrderedJson format, convert_text_format(body["text"]));
    if (!format.is_null()) chat["response_format"] = std::move(format);
  }
  // vLLM's extensions, read by the chat path as they are there.
  for (const char* key : {"chat_template_kwargs", "thinking_token_budget"})
    if (given(body, key)) chat[key] = body[key];
  // Sampling: the chat field names (and vLLM's extra sampling fields), then the chat parser's checks.
  OrderedJson sampling = OrderedJson::object();
  for (const char* key : {"temperature", "top_p", "response_format", "top_k", "min_p", "seed", "stop", "ignore_eos",
                          "min_tokens", "presence_penalty", "frequency_penalty", "repetition_penalty"})
    if (given(body, key) || given(chat, key)) sampling[key] = given(body, key) ? body[key] : chat[key];
  if (given(body, "max_output_tokens")) sampling["max_tokens"] = body["max_output_tokens"];
  auto parsed = parse_sampling_request(sampling, defaults, LogprobsStyle::kChat);
  if (!parsed.ok()) {
    std::string message = parsed.status().message();
    if (message.find("'max_tokens'") != std::string::npos)
      message.replace(message.find("'max_tokens'"), 12, "'max_output_tokens'");
    return errorf("{}", message);
  }
  r.sampling = std::move(*parsed);

  r.echo = OrderedJson::object();
  for (const char* key : {"instructions", "max_output_tokens", "metadata", "previous_response_id", "reasoning",
                          "temperature", "text", "tool_choice", "tools", "top_p", "parallel_tool_calls", "user"})
    r.echo[key] = given(body, key) ? body[key] : OrderedJson(nullptr);
  return r;
}

}  // namespace m2::server
