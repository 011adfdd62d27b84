// POST /v1/chat/completions: the chat template, the engine, and the M2
// parsers (reasoning split or append-think, tool calls typed by the
// request's schemas), whole or streamed as chat.completion.chunk events.
#include "server/routed_experts.h"
#include "server/chat_prompt.h"
#include "server/openai_generation.h"
#include "server/routes.h"

namespace m2::server {
namespace {

const char* openai_finish(FinishReason reason, bool tool_calls) {
  switch (reason) {
    case FinishReason::kLength: return "length";
    case FinishReason::kAbort: return "abort";
    default: return tool_calls ? "tool_calls" : "stop";
  }
}

// The legacy `functions` API: the one call as `function_call` ({name,
// arguments}, streamed in pieces like a tool call's function), finish reason
// "function_call".
void to_legacy_function_call(OrderedJson& message) {
  auto calls = message.find("tool_calls");
  if (calls == message.end()) return;
  OrderedJson fn = (*calls)[0]["function"];
  message.erase(calls);
  message["function_call"] = std::move(fn);
}

const char* legacy_finish(const char* finish) {
  return finish && std::string_view(finish) == "tool_calls" ? "function_call" : finish;
}

class ChatGeneration final : public OpenAiGeneration {
 public:
  ChatGeneration(ServerContext& ctx, std::shared_ptr<ResponseWriter> writer, const HttpRequest& request,
                 const OpenAiRequest& r, ChatPrompt prompt)
      : OpenAiGeneration(ctx, std::move(writer), request, "chatcmpl-", r),
        prompt_(std::move(prompt)),
        choices_(r.sampling.params.n) {
    prompt_.parse.reasoning = ctx.options.reasoning;
    for (Choice& c : choices_) {
      if (stream_) c.parser = std::make_unique<text::AssistantStreamParser>(prompt_.parse);
    }
  }

 private:
  struct Choice {
    std::string raw;                                     // whole output (non-streaming)
    std::unique_ptr<text::AssistantStreamParser> parser;  // streaming
    OrderedJson logprobs = OrderedJson::array();
    int64_t reasoning_tokens = 0;  // generated before the first `</think>`
    bool reasoning_done = false;
    const char* finish = nullptr;
    OrderedJson stop_reason;
    OrderedJson routed_experts;  // return_routed_experts: the encoding of routed_experts.h
  };

  OrderedJson stream_chunk(OrderedJson choices) const override {
    OrderedJson j = envelope("chat.completion.chunk", std::move(choices));
    if (include_usage_) j["usage"] = nullptr;
    return j;
  }

  void on_admitted() override {
    if (!stream_) return;
    writer_->begin_stream(200, "text/event-stream", {});
    OrderedJson first = OrderedJson::array();
    for (size_t i = 0; i < choices_.size(); ++i) {
      first.push_back({{"index", i},
                       {"delta", {{"role", "assistant"}, {"content", ""}}},
                       {"logprobs", nullptr},
                       {"finish_reason", nullptr}});
    }
    writer_->write(sse_data(stream_chunk(std::move(first))));
  }

  // vLLM's count: the tokens before the first `</think>`, when the prompt
  // opened the reasoning (whatever the reasoning mode).
  void count_reasoning(Choice& c, const RequestOutput& o) const {
    c.reasoning_tokens += count_reasoning_tokens(o.new_token_ids, prompt_.reasoning_end_token, &c.reasoning_done);
  }

  OrderedJson usage() const override {
    OrderedJson u = OpenAiGeneration::usage();
    int64_t reasoning = 0;
    for (const Choice& c : choices_) reasoning += c.reasoning_tokens;
    u["completion_tokens_details"] = {{"reasoning_tokens", reasoning}};
    return u;
  }

  void on_output(size_t, RequestOutput& o) override {
    Choice& c = choices_.at(static_cast<size_t>(o.index));
    if (prompt_.reasoning_end_token >= 0) count_reasoning(c, o);
    OrderedJson lp = OrderedJson::array();
    if (want_logprobs_) {
      for (const SampledToken& t : o.new_logprobs) lp.push_back(chat_logprob(formatter_, t));
    }
    if (o.finished) {
      c.stop_reason = stop_reason_json(o);
      if (return_routed_) c.routed_experts = routed_experts_json(o.routed_experts, ctx_);
    }
    if (!stream_) {
      c.raw += o.new_text;
      for (auto& e : lp) c.logprobs.push_back(std::move(e));
      if (o.finished) c.finish = openai_finish(o.finish_reason, false);
      return;
    }
    text::AssistantDelta delta = c.parser->feed(o.new_text);
    if (o.finished) {
      text::AssistantDelta last = c.parser->finish();
      delta.reasoning_content += last.reasoning_content;
      delta.content += last.content;
      for (auto& t : last.tool_calls) delta.tool_calls.push_back(std::move(t));
      c.finish = openai_finish(o.finish_reason, c.parser->has_tool_calls());
    }
    if (delta.empty() && lp.empty() && !o.finished) return;
    if (prompt_.legacy_functions) c.finish = legacy_finish(c.finish);
    OrderedJson choice = OrderedJson::object();
    choice["index"] = o.index;
    choice["delta"] = text::assistant_delta_json(delta);
    if (prompt_.legacy_functions) to_legacy_function_call(choice["delta"]);
    choice["logprobs"] = want_logprobs_ ? OrderedJson{{"content", std::move(lp)}} : OrderedJson(nullptr);
    choice["finish_reason"] = c.finish ? OrderedJson(c.finish) : OrderedJson(nullptr);
    if (o.finished) choice["stop_reason"] = c.stop_reason;
    if (o.finished && return_routed_) choice["routed_experts"] = c.routed_experts;
    writer_->write(sse_data(stream_chunk(OrderedJson::array({std::move(choice)}))));
  }

  void on_complete() override {
    std::string finish = choices_.empty() || !choices_[0].finish ? "" : choices_[0].finish;
    if (stream_) return end_stream(finish);
    OrderedJson choices = OrderedJson::array();
    for (size_t i = 0; i < choices_.size(); ++i) {
      Choice& c = choices_[i];
      text::AssistantParseOptions options = prompt_.parse;
      const text::AssistantMessage message = text::parse_assistant_output(c.raw, options);
      const char* fin = c.finish && std::string(c.finish) == "stop" ? message.finish_reason() : c.finish;
      if (prompt_.legacy_functions) fin = legacy_finish(fin);
      if (i == 0 && fin) finish = fin;
      OrderedJson choice = OrderedJson::object();
      choice["index"] = i;
      choice["message"] = text::assistant_message_json(message, options.reasoning);
      if (prompt_.legacy_functions) to_legacy_function_call(choice["message"]);
      choice["logprobs"] = want_logprobs_ ? OrderedJson{{"content", c.logprobs}} : OrderedJson(nullptr);
      choice["finish_reason"] = fin ? OrderedJson(fin) : OrderedJson(nullptr);
      choice["stop_reason"] = c.stop_reason;
      if (return_routed_) choice["routed_experts"] = c.routed_experts;
      choices.push_back(std::move(choice));
    }
    OrderedJson j = envelope("chat.completion", std::move(choices));
    j["usage"] = usage();
    respond_json(j, finish);
  }

  ChatPrompt prompt_;
  std::vector<Choice> choices_;
 public:
  bool return_routed_ = false;
};

}  // namespace

void handle_chat_completions(ServerContext& ctx, const HttpRequest& request, const OrderedJson& body,
                             std::shared_ptr<ResponseWriter> writer) {
  auto fail = [&](const Status& s) { respond_error(ctx, request, *writer, bad_request(s.message()), ApiFlavor::kOpenAI); };
  auto r = parse_openai_request(body, ctx.defaults, LogprobsStyle::kChat);
  if (!r.ok()) return fail(r.status());
  auto routing = parse_routing_fields(body, ctx);
  if (!routing.ok()) return fail(routing.status());
  auto turn = build_chat_turn(body, r->sampling, ctx, false);
  if (!turn.ok()) return fail(turn.status());
  Status routed = apply_routing_fields(*routing, static_cast<int64_t>(turn->job.prompt.size()), &turn->job.params);
  if (!routed.ok()) return fail(routed);
  std::vector<EngineJob> jobs;
  jobs.push_back(std::move(turn->job));
  auto gen = std::make_shared<ChatGeneration>(ctx, std::move(writer), request, *r, std::move(turn->prompt));
  gen->return_routed_ = routing->return_routed_experts;
  gen->start(std::move(jobs));
}

}  // namespace m2::server
