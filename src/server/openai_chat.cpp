// POST /v1/chat/completions: the chat template, the engine, and the M2
// parsers (reasoning split or append-think, tool calls typed by the
// request's schemas), whole or streamed as chat.completion.chunk events.
#include <optional>

#include "server/chat_prompt.h"
#include "server/generation.h"
#include "server/json_fields.h"
#include "server/logprobs_json.h"
#include "server/routes.h"
#include "server/sampling_request.h"

namespace m2::server {
namespace {

const char* openai_finish(FinishReason reason, bool tool_calls) {
  switch (reason) {
    case FinishReason::kLength: return "length";
    case FinishReason::kAbort: return "abort";
    default: return tool_calls ? "tool_calls" : "stop";
  }
}

class ChatGeneration final : public Generation {
 public:
  ChatGeneration(ServerContext& ctx, std::shared_ptr<ResponseWriter> writer, const HttpRequest& request,
                 ChatPrompt prompt, int n, bool stream, bool include_usage, bool want_logprobs, bool tokens_as_ids)
      : Generation(ctx, std::move(writer), request, ApiFlavor::kOpenAI, "chatcmpl-" + random_hex(16), stream),
        prompt_(std::move(prompt)),
        include_usage_(include_usage),
        want_logprobs_(want_logprobs),
        formatter_(*ctx.tokenizer, tokens_as_ids),
        choices_(n) {
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
    const char* finish = nullptr;
    OrderedJson stop_reason;
  };

  OrderedJson chunk(OrderedJson choices) const {
    OrderedJson j = OrderedJson::object();
    j["id"] = id_;
    j["object"] = "chat.completion.chunk";
    j["created"] = created_;
    j["model"] = ctx_.model_name();
    j["choices"] = std::move(choices);
    if (include_usage_) j["usage"] = nullptr;
    return j;
  }

  OrderedJson usage() const {
    OrderedJson u = {{"prompt_tokens", prompt_tokens_},
                     {"completion_tokens", output_tokens_},
                     {"total_tokens", prompt_tokens_ + output_tokens_}};
    u["prompt_tokens_details"] = {{"cached_tokens", cached_tokens_}};
    return u;
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
    writer_->write(sse_data(chunk(std::move(first))));
  }

  void on_output(size_t, RequestOutput& o) override {
    Choice& c = choices_.at(static_cast<size_t>(o.index));
    OrderedJson lp = OrderedJson::array();
    if (want_logprobs_) {
      for (const SampledToken& t : o.new_logprobs) lp.push_back(chat_logprob(formatter_, t));
    }
    if (o.finished) {
      c.stop_reason = stop_reason_json(o);
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
    OrderedJson choice = OrderedJson::object();
    choice["index"] = o.index;
    choice["delta"] = text::assistant_delta_json(delta);
    choice["logprobs"] = want_logprobs_ ? OrderedJson{{"content", std::move(lp)}} : OrderedJson(nullptr);
    choice["finish_reason"] = c.finish ? OrderedJson(c.finish) : OrderedJson(nullptr);
    if (o.finished) choice["stop_reason"] = c.stop_reason;
    writer_->write(sse_data(chunk(OrderedJson::array({std::move(choice)}))));
  }

  void on_complete() override {
    std::string finish = choices_.empty() || !choices_[0].finish ? "" : choices_[0].finish;
    if (stream_) {
      if (include_usage_) {
        OrderedJson last = chunk(OrderedJson::array());
        last["usage"] = usage();
        writer_->write(sse_data(last));
      }
      writer_->write("data: [DONE]\n\n");
      writer_->end();
      return log_done(200, finish);
    }
    OrderedJson choices = OrderedJson::array();
    for (size_t i = 0; i < choices_.size(); ++i) {
      Choice& c = choices_[i];
      text::AssistantParseOptions options = prompt_.parse;
      const text::AssistantMessage message = text::parse_assistant_output(c.raw, options);
      const char* fin = c.finish && std::string(c.finish) == "stop" ? message.finish_reason() : c.finish;
      if (i == 0 && fin) finish = fin;
      OrderedJson choice = OrderedJson::object();
      choice["index"] = i;
      choice["message"] = text::assistant_message_json(message, options.reasoning);
      choice["logprobs"] = want_logprobs_ ? OrderedJson{{"content", c.logprobs}} : OrderedJson(nullptr);
      choice["finish_reason"] = fin ? OrderedJson(fin) : OrderedJson(nullptr);
      choice["stop_reason"] = c.stop_reason;
      choices.push_back(std::move(choice));
    }
    OrderedJson j = OrderedJson::object();
    j["id"] = id_;
    j["object"] = "chat.completion";
    j["created"] = created_;
    j["model"] = ctx_.model_name();
    j["choices"] = std::move(choices);
    j["usage"] = usage();
    HttpResponse r;
    r.body = dump_json(j);
    writer_->respond(std::move(r));
    log_done(200, finish);
  }

  void on_error(const ApiError& error) override {
    if (!stream_) return respond_error(error);
    writer_->write(sse_data(error_json(error, flavor_)));
    writer_->write("data: [DONE]\n\n");
    writer_->end();
    log_done(error.status, "");
  }

  ChatPrompt prompt_;
  bool include_usage_, want_logprobs_;
  TokenFormatter formatter_;
  std::vector<Choice> choices_;
};

}  // namespace

void handle_chat_completions(ServerContext& ctx, const HttpRequest& request, const OrderedJson& body,
                             std::shared_ptr<ResponseWriter> writer) {
  auto fail = [&](const Status& s) { respond_error(ctx, request, *writer, bad_request(s.message()), ApiFlavor::kOpenAI); };
  auto stream = opt_bool(body, "stream");
  if (!stream.ok()) return fail(stream.status());
  auto include_usage = stream_include_usage(body);
  if (!include_usage.ok()) return fail(include_usage.status());
  auto as_ids = opt_bool(body, "return_tokens_as_token_ids");
  if (!as_ids.ok()) return fail(as_ids.status());
  auto sampling = parse_sampling_request(body, ctx.defaults, LogprobsStyle::kChat);
  if (!sampling.ok()) return fail(sampling.status());
  auto prompt = build_chat_prompt(body, *ctx.chat_template, *ctx.tokenizer);
  if (!prompt.ok()) return fail(prompt.status());
  Status fit = fit_to_context(*sampling, static_cast<int64_t>(prompt->tokens.size()), ctx.max_model_len, false);
  if (!fit.ok()) return fail(fit);

  auto engine_params = chat_engine_params(sampling->params, *prompt, ctx.replay, ctx.vocab_size);
  if (!engine_params.ok()) return fail(engine_params.status());
  SamplingParams params = std::move(*engine_params);

  const bool want_logprobs = params.logprobs >= 0;
  std::vector<EngineJob> jobs(1);
  jobs[0].prompt = prompt->tokens;
  jobs[0].params = std::move(params);
  auto gen = std::make_shared<ChatGeneration>(ctx, std::move(writer), request, std::move(*prompt), jobs[0].params.n,
                                              stream->value_or(false), *include_usage, want_logprobs,
                                              as_ids->value_or(false));
  gen->start(std::move(jobs));
}

}  // namespace m2::server
