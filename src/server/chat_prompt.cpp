#include "server/chat_prompt.h"

#include "server/json_fields.h"

namespace m2::server {
namespace {

Status check_tools(const OrderedJson& tools) {
  if (tools.is_null()) return Status();
  if (!tools.is_array()) return errorf("'tools' must be an array, got {}", json_type(tools));
  for (size_t i = 0; i < tools.size(); ++i) {
    const OrderedJson& t = tools[i];
    if (!t.is_object()) return errorf("tools[{}] must be an object, got {}", i, json_type(t));
    if (t.contains("type") && t["type"] != "function") return errorf("tools[{}].type must be 'function'", i);
    auto fn = t.find("function");
    if (fn == t.end() || !fn->is_object()) return errorf("tools[{}] needs a 'function' object", i);
    auto name = fn->find("name");
    if (name == fn->end() || !name->is_string() || name->get<std::string>().empty())
      return errorf("tools[{}].function needs a non-empty string 'name'", i);
    if (auto p = fn->find("parameters"); p != fn->end() && !p->is_null() && !p->is_object())
      return errorf("tools[{}].function.parameters must be an object (a JSON schema)", i);
  }
  return Status();
}

bool has_tool(const OrderedJson& tools, const std::string& name) {
  if (!tools.is_array()) return false;
  for (const auto& t : tools)
    if (t.contains("function") && t["function"].is_object() && t["function"].value("name", "") == name) return true;
  return false;
}

Result<std::vector<int32_t>> encode(const text::Tokenizer& tokenizer, const std::string& s) {
  return tokenizer.encode(s, false);
}

}  // namespace

Result<ChatPrompt> build_chat_prompt(const OrderedJson& body, const text::ChatTemplate& chat_template,
                                     const text::Tokenizer& tokenizer) {
  if (!body.is_object()) return errorf("the request body must be a JSON object, got {}", json_type(body));
  auto msgs = body.find("messages");
  if (msgs == body.end()) return errorf("'messages' is required");
  if (!msgs->is_array()) return errorf("'messages' must be an array, got {}", json_type(*msgs));
  if (msgs->empty()) return errorf("'messages' must not be empty");
  OrderedJson request = body;
  for (size_t i = 0; i < msgs->size(); ++i) {
    OrderedJson& m = request["messages"][i];
    if (!m.is_object()) return errorf("messages[{}] must be an object, got {}", i, json_type(m));
    auto role = m.find("role");
    if (role == m.end() || !role->is_string()) return errorf("messages[{}] needs a string 'role'", i);
    const std::string r = role->get<std::string>();
    if (r == "developer") {
      *role = "system";
    } else if (r != "system" && r != "user" && r != "assistant" && r != "tool") {
      return errorf("messages[{}].role '{}' is unknown (system, developer, user, assistant, tool)", i, r);
    }
  }
  const OrderedJson tools = body.value("tools", OrderedJson());
  M2_RETURN_IF_ERROR(check_tools(tools));
  const bool have_tools = tools.is_array() && !tools.empty();

  ChatPrompt out;
  // tool_choice: "none" | "auto" | "required" | {"type": "function", "function": {"name"}}
  std::string choice = have_tools ? "auto" : "none";
  if (auto tc = body.find("tool_choice"); tc != body.end() && !tc->is_null()) {
    if (tc->is_string()) {
      choice = tc->get<std::string>();
      if (choice != "none" && choice != "auto" && choice != "required")
        return errorf("'tool_choice' must be none, auto, required or a function, got '{}'", choice);
    } else if (tc->is_object() && tc->contains("function") && (*tc)["function"].is_object() &&
               (*tc)["function"].contains("name") && (*tc)["function"]["name"].is_string()) {
      out.forced_tool = (*tc)["function"]["name"].get<std::string>();
      if (!has_tool(tools, out.forced_tool))
        return errorf("'tool_choice' names the function '{}', which is not in 'tools'", out.forced_tool);
      choice = "named";
    } else {
      return errorf("'tool_choice' must be a string or {{\"type\": \"function\", \"function\": {{\"name\": ...}}}}");
    }
  }
  if (choice == "required" && !have_tools)
    return errorf("'tool_choice' is 'required' but no 'tools' are given");

  M2_ASSIGN_OR_RETURN(out.text, chat_template.render_request(request));
  M2_ASSIGN_OR_RETURN(out.tokens, encode(tokenizer, out.text));

  // The parsers see the tools and tool_choice only.
  Json parse_req = Json::object();
  if (have_tools) parse_req["tools"] = Json::parse(tools.dump());
  parse_req["tool_choice"] = choice == "none" ? "none" : "auto";
  out.parse = text::options_from_request(parse_req);
  // The generation prompt ends inside an open <think> (M2's template always
  // does); without it, the model's first words are the answer.
  const std::string_view t = out.text;
  out.parse.starts_in_reasoning = t.size() >= 8 && t.substr(t.size() - 8) == "<think>\n";

  if (choice == "required" || choice == "named") {
    auto close = tokenizer.token_to_id("</think>");
    if (!close) return errorf("'tool_choice' {} needs a `</think>` token in the tokenizer", choice);
    std::string opening = "\n\n<minimax:tool_call>\n";
    if (choice == "named") opening += "<invoke name=\"" + out.forced_tool + "\">";
    M2_ASSIGN_OR_RETURN(out.forced_after, encode(tokenizer, opening));
    out.forced_after_token = *close;
    if (!out.parse.starts_in_reasoning) {  // no reasoning to wait for: the call opens at once
      out.forced_first = std::move(out.forced_after);
      out.forced_after.clear();
      out.forced_after_token = -1;
    }
  }
  return out;
}

Result<ChatTurn> build_chat_turn(const OrderedJson& chat_body, SamplingRequest sampling, const ServerContext& ctx,
                                 bool clamp_max_tokens) {
  ChatTurn turn;
  M2_ASSIGN_OR_RETURN(turn.prompt, build_chat_prompt(chat_body, *ctx.chat_template, *ctx.tokenizer));
  const ChatPrompt& prompt = turn.prompt;
  M2_RETURN_IF_ERROR(
      fit_to_context(sampling, static_cast<int64_t>(prompt.tokens.size()), ctx.max_model_len, clamp_max_tokens));
  SamplingParams& params = sampling.params;
  params.forced_after_token = prompt.forced_after_token;
  params.forced_after = prompt.forced_after;
  params.forced_tokens = prompt.forced_first;
  if (ctx.replay) {
    if (auto r = ctx.replay->select(prompt.text))
      params.forced_tokens.insert(params.forced_tokens.end(), r->begin(), r->end());
  }
  M2_RETURN_IF_ERROR(params.validate(ctx.vocab_size));
  turn.job.prompt = prompt.tokens;
  turn.job.params = std::move(params);
  return turn;
}

}  // namespace m2::server
