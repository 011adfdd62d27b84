#include "server/chat_prompt.h"

#include "server/json_fields.h"
#include "server/structured_output.h"
#include "server/thinking_request.h"
#include "server/tool_request.h"

namespace m2::server {
namespace {

Result<std::vector<int32_t>> encode(const text::Tokenizer& tokenizer, const std::string& s) {
  return tokenizer.encode(s, false);
}

// Checks the roles and maps the ones the template does not know: "developer"
// is rendered as "system"; the legacy `function_call` of an assistant becomes
// a tool call and a "function" message (its result) a "tool" message.
Status normalize_roles(OrderedJson& messages) {
  for (size_t i = 0; i < messages.size(); ++i) {
    OrderedJson& m = messages[i];
    if (!m.is_object()) return errorf("messages[{}] must be an object, got {}", i, json_type(m));
    auto role = m.find("role");
    if (role == m.end() || !role->is_string()) return errorf("messages[{}] needs a string 'role'", i);
    const std::string r = role->get<std::string>();
    if (r == "developer") {
      *role = "system";
    } else if (r == "function") {
      *role = "tool";
    } else if (r != "system" && r != "user" && r != "assistant" && r != "tool") {
      return errorf("messages[{}].role '{}' is unknown (system, developer, user, assistant, tool, function)", i, r);
    }
    auto fc = m.find("function_call");
    if (r == "assistant" && fc != m.end() && !fc->is_null()) {
      if (m.contains("tool_calls") && !m["tool_calls"].is_null())
        return errorf("messages[{}] has both 'function_call' and 'tool_calls'", i);
      if (!fc->is_object()) return errorf("messages[{}].function_call must be an object", i);
      m["tool_calls"] = OrderedJson::array({{{"id", "call_" + std::to_string(i)}, {"type", "function"},
                                             {"function", *fc}}});
      m.erase("function_call");
    }
  }
  return Status();
}

// parallel_tool_calls false: the sequence ends once its first call is complete.
class FirstToolCallStop final : public TextStop {
 public:
  explicit FirstToolCallStop(const text::AssistantParseOptions& options) : parser_(options) {}
  bool feed(std::string_view text) override {
    parser_.feed(text);
    return parser_.num_complete_tool_calls() > 0;
  }

 private:
  text::AssistantStreamParser parser_;
};

}  // namespace

Result<ChatPrompt> build_chat_prompt(const OrderedJson& body, const text::ChatTemplate& chat_template,
                                     const text::Tokenizer& tokenizer) {
  if (!body.is_object()) return errorf("the request body must be a JSON object, got {}", json_type(body));
  auto msgs = body.find("messages");
  if (msgs == body.end()) return errorf("'messages' is required");
  if (!msgs->is_array()) return errorf("'messages' must be an array, got {}", json_type(*msgs));
  if (msgs->empty()) return errorf("'messages' must not be empty");
  OrderedJson request = body;
  M2_RETURN_IF_ERROR(normalize_roles(request["messages"]));
  M2_ASSIGN_OR_RETURN(ToolRequest tools, parse_tool_request(body));
  for (const char* key : {"functions", "function_call", "tool_choice"}) request.erase(key);
  if (tools.rendered.is_null() || tools.rendered.empty()) {
    request.erase("tools");
  } else {
    request["tools"] = tools.rendered;
  }

  M2_ASSIGN_OR_RETURN(ThinkingRequest thinking, parse_thinking_request(body, request));
  for (const char* key : {"reasoning_effort", "thinking_token_budget"}) request.erase(key);

  ChatPrompt out;
  M2_ASSIGN_OR_RETURN(out.text, chat_template.render_request(request));
  M2_ASSIGN_OR_RETURN(out.tokens, encode(tokenizer, out.text));

  // The parsers type arguments by every declared tool and return the allowed calls.
  out.parse = text::options_from_request(Json{{"tools", Json::parse(tools.tools.dump())}});
  out.parse.allowed_tools = tools.allowed;
  // The generation prompt ends inside an open <think> (M2's template always
  // does), and so does a continued reasoning; otherwise the model's first
  // words are the answer.
  out.parse.starts_in_reasoning = text::prompt_opens_reasoning(out.text);
  const std::optional<int32_t> think_close = tokenizer.token_to_id("</think>");
  if (out.parse.starts_in_reasoning && think_close) {
    out.reasoning_end_token = *think_close;
    out.reasoning_budget = thinking.budget;
  } else if (out.parse.starts_in_reasoning && thinking.budget >= 0) {
    return errorf("a thinking budget needs a `</think>` token in the tokenizer");
  }
  out.stop_after_first_call = !tools.parallel && tools.choice != ToolRequest::Choice::kNone;
  out.legacy_functions = tools.legacy_functions;

  out.tool_grammar = forced_tool_call_grammar(tools);
  if (!out.tool_grammar) {
    M2_ASSIGN_OR_RETURN(out.tool_grammar, strict_tool_call_grammar(tools));
  }
  using Choice = ToolRequest::Choice;
  if (tools.choice == Choice::kRequired || tools.choice == Choice::kNamed) {
    if (!think_close) return errorf("a forced tool call needs a `</think>` token in the tokenizer");
    std::string opening = "\n\n<minimax:tool_call>\n";
    if (tools.choice == Choice::kNamed) opening += "<invoke name=\"" + tools.forced_name + "\">";
    M2_ASSIGN_OR_RETURN(out.forced_after, encode(tokenizer, opening));
    out.forced_after_token = *think_close;
    out.forced_tool = tools.forced_name;
    if (!out.parse.starts_in_reasoning) {  // no reasoning to wait for: the call opens at once
      out.forced_first = std::move(out.forced_after);
      out.forced_after.clear();
      out.forced_after_token = -1;
    }
  }
  return out;
}

int64_t count_reasoning_tokens(const std::vector<int32_t>& ids, int32_t end_token, bool* done) {
  int64_t n = 0;
  for (int32_t id : ids) {
    if (*done) break;
    if (id == end_token) {
      *done = true;
    } else {
      ++n;
    }
  }
  return n;
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
  if (prompt.reasoning_budget >= 0) {
    params.reasoning_budget = prompt.reasoning_budget;
    params.reasoning_end_token = prompt.reasoning_end_token;
  }
  if (prompt.stop_after_first_call) {
    params.text_stop = std::make_shared<const TextStopFactory>(
        [options = prompt.parse] { return std::make_unique<FirstToolCallStop>(options); });
  }
  M2_ASSIGN_OR_RETURN(std::optional<OutputFormat> format, read_output_format(chat_body));
  if (format && prompt.tool_grammar)
    return errorf("'{}' cannot be combined with a forced tool call or strict tools (tool_choice, tools[].function.strict)",
                  format->field);
  // Without a compiler (a tokenizer that is not byte-level: cmd_serve) a
  // forced call is still forced open, its arguments unconstrained; an
  // output format is refused (compile_constraint).
  if (format || (prompt.tool_grammar && ctx.constraints)) {
    const ConstraintSource& src = format ? format->source : *prompt.tool_grammar;
    const std::string field = format ? format->field : std::string("tools");
    M2_ASSIGN_OR_RETURN(params.constraint, compile_constraint(ctx, src, field));
    if (prompt.parse.starts_in_reasoning) {
      if (prompt.reasoning_end_token < 0) return errorf("'{}' needs a `</think>` token to follow the reasoning", field);
      params.constraint_after_token = prompt.reasoning_end_token;
    }
  }
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
