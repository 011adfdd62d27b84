#include "text/chat_request.h"

#include <fmt/format.h>

#include <string>

namespace m2::text {

Result<OrderedJson> parse_ordered_json(std::string_view text, std::string_view what) {
  try {
    return OrderedJson::parse(text.begin(), text.end());
  } catch (const OrderedJson::parse_error& e) {
    return errorf("{}: invalid JSON at byte {}: {}", what, e.byte, json_error_text(e));
  } catch (const OrderedJson::exception& e) {
    // e.g. out_of_range for a number like 1e400 that no double can hold
    return errorf("{}: unsupported JSON: {}", what, json_error_text(e));
  }
}

namespace {

const char* type_name(const OrderedJson& j) {
  switch (j.type()) {
    case OrderedJson::value_t::null:
      return "null";
    case OrderedJson::value_t::object:
      return "object";
    case OrderedJson::value_t::array:
      return "array";
    case OrderedJson::value_t::string:
      return "string";
    case OrderedJson::value_t::boolean:
      return "boolean";
    default:
      return "number";
  }
}

// Text of a content given as parts; each part must be {"type": "text", ...}.
Result<std::string> check_parts(const OrderedJson& parts, const std::string& where, bool join) {
  std::string text;
  for (size_t j = 0; j < parts.size(); ++j) {
    const OrderedJson& part = parts[j];
    const std::string at = fmt::format("{}.content[{}]", where, j);
    if (!part.is_object()) return errorf("{}: expected a content part object, got {}", at, type_name(part));
    auto type = part.find("type");
    if (type == part.end() || !type->is_string()) return errorf("{}: missing string field 'type'", at);
    if (*type != "text") {
      return errorf("{}: content part type '{}' is not supported (this model takes text only)", at,
                    type->get<std::string>());
    }
    auto t = part.find("text");
    if (t == part.end() || !t->is_string()) return errorf("{}: text part without a string 'text' field", at);
    if (join) {
      if (j) text += '\n';
      text += t->get<std::string>();
    }
  }
  return text;
}

Status normalize_tool_calls(OrderedJson& calls, const std::string& where) {
  if (!calls.is_array()) return errorf("{}.tool_calls: expected an array, got {}", where, type_name(calls));
  for (size_t k = 0; k < calls.size(); ++k) {
    OrderedJson& call = calls[k];
    const std::string at = fmt::format("{}.tool_calls[{}]", where, k);
    if (!call.is_object()) return errorf("{}: expected an object, got {}", at, type_name(call));
    auto type = call.find("type");
    if (type != call.end() && !type->is_null() && *type != "function") {
      return errorf("{}.type: only 'function' tool calls are supported", at);
    }
    auto fn = call.find("function");
    if (fn == call.end() || !fn->is_object()) return errorf("{}: missing object field 'function'", at);
    auto name = fn->find("name");
    if (name == fn->end() || !name->is_string()) return errorf("{}.function: missing string field 'name'", at);
    auto args = fn->find("arguments");
    if (args == fn->end() || args->is_null() || (args->is_string() && args->get<std::string>().empty())) {
      (*fn)["arguments"] = OrderedJson::object();
    } else if (args->is_string()) {
      M2_ASSIGN_OR_RETURN(OrderedJson parsed, parse_ordered_json(args->get<std::string>(), at + ".function.arguments"));
      if (!parsed.is_object())
        return errorf("{}.function.arguments: expected a JSON object, got {}", at, type_name(parsed));
      *args = std::move(parsed);
    } else if (!args->is_object()) {
      // Templates iterate the arguments as a mapping.
      return errorf("{}.function.arguments: expected a JSON object or a string holding one, got {}", at,
                    type_name(*args));
    }
  }
  return {};
}

}  // namespace

Result<OrderedJson> normalize_openai_messages(const OrderedJson& request, bool keep_content_parts) {
  if (!request.is_object()) return errorf("request: expected a JSON object, got {}", type_name(request));
  auto it = request.find("messages");
  if (it == request.end()) return errorf("request: missing field 'messages'");
  if (!it->is_array()) return errorf("messages: expected an array, got {}", type_name(*it));
  if (it->empty()) return errorf("messages: the conversation is empty");
  OrderedJson out = OrderedJson::array();
  for (size_t i = 0; i < it->size(); ++i) {
    const OrderedJson& in = (*it)[i];
    const std::string where = fmt::format("messages[{}]", i);
    if (!in.is_object()) return errorf("{}: expected an object, got {}", where, type_name(in));
    auto role = in.find("role");
    if (role == in.end() || !role->is_string()) return errorf("{}: missing string field 'role'", where);
    OrderedJson msg = OrderedJson::object();
    for (const auto& [key, value] : in.items()) {
      if (key == "content") {
        if (value.is_null()) {
          msg[key] = "";
        } else if (value.is_array()) {
          M2_ASSIGN_OR_RETURN(std::string joined, check_parts(value, where, !keep_content_parts));
          if (keep_content_parts)
            msg[key] = value;
          else
            msg[key] = std::move(joined);
        } else if (value.is_string()) {
          msg[key] = value;
        } else {
          return errorf("{}.content: expected a string, an array of parts or null, got {}", where, type_name(value));
        }
      } else if (!value.is_null()) {
        msg[key] = value;
      }
    }
    if (auto calls = msg.find("tool_calls"); calls != msg.end()) {
      M2_RETURN_IF_ERROR(normalize_tool_calls(*calls, where));
    }
    if (auto r = msg.find("reasoning_content"); r != msg.end() && !r->is_string()) {
      return errorf("{}.reasoning_content: expected a string, got {}", where, type_name(*r));
    }
    if (!msg.contains("reasoning_content")) {
      if (auto r = msg.find("reasoning"); r != msg.end() && r->is_string()) msg["reasoning_content"] = *r;
    }
    out.push_back(std::move(msg));
  }
  return out;
}

Result<ChatTemplateInputs> prepare_chat_template_inputs(const OrderedJson& request, bool keep_content_parts) {
  ChatTemplateInputs in;
  M2_ASSIGN_OR_RETURN(in.messages, normalize_openai_messages(request, keep_content_parts));
  in.tools = nullptr;
  if (auto t = request.find("tools"); t != request.end() && !t->is_null()) {
    if (!t->is_array()) return errorf("tools: expected an array, got {}", type_name(*t));
    for (size_t i = 0; i < t->size(); ++i) {
      if (!(*t)[i].is_object()) return errorf("tools[{}]: expected an object, got {}", i, type_name((*t)[i]));
    }
    in.tools = *t;
  }
  in.documents = nullptr;
  if (auto d = request.find("documents"); d != request.end()) in.documents = *d;
  if (auto g = request.find("add_generation_prompt"); g != request.end() && !g->is_null()) {
    if (!g->is_boolean()) return errorf("add_generation_prompt: expected a boolean, got {}", type_name(*g));
    in.add_generation_prompt = g->get<bool>();
  }
  if (auto c = request.find("continue_final_message"); c != request.end() && !c->is_null()) {
    if (!c->is_boolean()) return errorf("continue_final_message: expected a boolean, got {}", type_name(*c));
    in.continue_final_message = c->get<bool>();
  }
  if (in.continue_final_message) {
    if (auto g = request.find("add_generation_prompt"); g != request.end() && g->is_boolean() && g->get<bool>())
      return errorf("continue_final_message and add_generation_prompt cannot both be true");
    in.add_generation_prompt = false;
  }
  in.template_kwargs = OrderedJson::object();
  if (auto k = request.find("chat_template_kwargs"); k != request.end() && !k->is_null()) {
    if (!k->is_object()) return errorf("chat_template_kwargs: expected an object, got {}", type_name(*k));
    for (const auto& [key, value] : k->items()) {
      if (key == "messages" || key == "tools" || key == "documents" || key == "add_generation_prompt") {
        return errorf("chat_template_kwargs: '{}' cannot be set here; use the request field", key);
      }
      in.template_kwargs[key] = value;
    }
  }
  return in;
}

}  // namespace m2::text
