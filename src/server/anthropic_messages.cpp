// POST /v1/messages and /v1/messages/count_tokens: Anthropic's Messages API
// over the same prompt builder and parsers as chat completions, reasoning
// always split (thinking blocks are Anthropic's native form). Streams the
// exact event sequence: message_start and ping once the request is queued
// (then a ping after every 2 s without an event), then per block
// content_block_start / content_block_delta (thinking_delta, text_delta,
// input_json_delta; a thinking block ends with its signature_delta) /
// content_block_stop, then message_delta and message_stop. Thinking blocks
// carry the server's signature of their text (thinking_signature.h).
#include <atomic>
#include <chrono>

#include "server/anthropic_request.h"
#include "server/chat_prompt.h"
#include "server/generation.h"
#include "server/json_fields.h"
#include "server/routes.h"

namespace m2::server {
namespace {

std::string event(const char* name, const OrderedJson& data) {
  return std::string("event: ") + name + "\ndata: " + dump_json(data) + "\n\n";
}

// "call_<hex>" -> "toolu_<hex>": Anthropic clients expect their own prefix.
std::string tool_use_id(const std::string& call_id) {
  return "toolu_" + (call_id.rfind("call_", 0) == 0 ? call_id.substr(5) : call_id);
}

class MessagesGeneration final : public Generation {
 public:
  MessagesGeneration(ServerContext& ctx, std::shared_ptr<ResponseWriter> writer, const HttpRequest& request,
                     ChatPrompt prompt, bool stream)
      : Generation(ctx, std::move(writer), request, ApiFlavor::kAnthropic, "msg_" + random_hex(12), stream),
        prompt_(std::move(prompt)),
        prompt_tokens_seen_(static_cast<int64_t>(prompt_.tokens.size())) {
    prompt_.parse.reasoning = text::ReasoningMode::kSplit;
    if (stream_) parser_ = std::make_unique<text::AssistantStreamParser>(prompt_.parse);
  }

 private:
  enum class Block { kNone, kThinking, kText, kToolUse };

  OrderedJson usage(int64_t output_tokens) const {
    return {{"input_tokens", prompt_tokens_seen_ - cached_seen_},
            {"cache_creation_input_tokens", 0},
            {"cache_read_input_tokens", cached_seen_},
            {"output_tokens", output_tokens}};
  }

  const char* stop_reason(bool tool_calls) const {
    if (finish_ == FinishReason::kLength) return "max_tokens";
    if (tool_calls) return "tool_use";
    if (!stop_string_.is_null()) return "stop_sequence";
    return "end_turn";
  }

  // message_start and a first ping as soon as the request is queued, then a
  // ping after every kPingSilence without an event, so that a request that
  // waits or prefills for long shows it is alive.
  void on_admitted() override {
    if (!stream_) return;
    writer_->begin_stream(200, "text/event-stream", {});
    OrderedJson message = {{"id", id_},
                           {"type", "message"},
                           {"role", "assistant"},
                           {"model", ctx_.model_name()},
                           {"content", OrderedJson::array()},
                           {"stop_reason", nullptr},
                           {"stop_sequence", nullptr},
                           {"usage", usage(0)}};
    write_event("message_start", {{"type", "message_start"}, {"message", std::move(message)}});
    write_event("ping", {{"type", "ping"}});
    std::weak_ptr<Generation> weak = weak_from_this();
    std::weak_ptr<ResponseWriter> writer = writer_;
    ctx_.heartbeat.add([weak, writer, &ctx = ctx_] {
      auto self = std::static_pointer_cast<MessagesGeneration>(weak.lock());
      auto w = writer.lock();
      if (!self || !w || self->done_.load() || w->disconnected() || ctx.draining.load()) return false;
      w->post([self] { self->beat(); });
      return true;
    });
  }

  void beat() {
    if (!done_.load() && Clock::now() - last_event_ >= kPingSilence) write_event("ping", {{"type", "ping"}});
  }

  void write_event(const char* name, const OrderedJson& data) {
    writer_->write(event(name, data));
    last_event_ = Clock::now();
  }

  void close_block() {
    if (block_ == Block::kNone) return;
    if (block_ == Block::kThinking) {
      delta({{"type", "signature_delta"}, {"signature", ctx_.thinking_signer.sign(thinking_)}});
      thinking_.clear();
    }
    write_event("content_block_stop", {{"type", "content_block_stop"}, {"index", index_}});
    block_ = Block::kNone;
  }

  void open_block(Block type, OrderedJson content_block) {
    close_block();
    ++index_;
    block_ = type;
    write_event("content_block_start",
                {{"type", "content_block_start"}, {"index", index_}, {"content_block", content_block}});
  }

  void delta(OrderedJson d) {
    write_event("content_block_delta", {{"type", "content_block_delta"}, {"index", index_}, {"delta", d}});
  }

  void send(const text::AssistantDelta& d) {
    if (!d.reasoning_content.empty()) {
      if (block_ != Block::kThinking) open_block(Block::kThinking, {{"type", "thinking"}, {"thinking", ""}, {"signature", ""}});
      delta({{"type", "thinking_delta"}, {"thinking", d.reasoning_content}});
      thinking_ += d.reasoning_content;
    }
    if (!d.content.empty()) {
      if (block_ != Block::kText) open_block(Block::kText, {{"type", "text"}, {"text", ""}});
      delta({{"type", "text_delta"}, {"text", d.content}});
    }
    for (const text::ToolCallDelta& t : d.tool_calls) {
      if (!t.id.empty()) {
        open_block(Block::kToolUse, {{"type", "tool_use"},
                                     {"id", tool_use_id(t.id)},
                                     {"name", t.name},
                                     {"input", OrderedJson::object()}});
        has_tool_calls_ = true;
      }
      if (!t.arguments.empty() && block_ == Block::kToolUse)
        delta({{"type", "input_json_delta"}, {"partial_json", t.arguments}});
    }
  }

  void on_output(size_t, RequestOutput& o) override {
    if (!started_) {
      started_ = true;
      prompt_tokens_seen_ = o.num_prompt_tokens;
      cached_seen_ = o.num_cached_tokens;
    }
    if (o.finished) {
      finish_ = o.finish_reason;
      if (!o.stop_string.empty()) stop_string_ = o.stop_string;
    }
    if (!stream_) {
      raw_ += o.new_text;
      return;
    }
    send(parser_->feed(o.new_text));
    if (o.finished) {
      send(parser_->finish());
      has_tool_calls_ = has_tool_calls_ || parser_->has_tool_calls();
    }
  }

  void on_complete() override {
    done_.store(true);
    if (stream_) {
      close_block();
      const char* reason = stop_reason(has_tool_calls_);
      write_event("message_delta", {{"type", "message_delta"},
                                    {"delta", {{"stop_reason", reason}, {"stop_sequence", stop_string_}}},
                                    {"usage", usage(output_tokens_)}});
      write_event("message_stop", {{"type", "message_stop"}});
      writer_->end();
      return log_done(200, reason);
    }
    const text::AssistantMessage m = text::parse_assistant_output(raw_, prompt_.parse);
    OrderedJson content = OrderedJson::array();
    if (m.reasoning_content)
      content.push_back({{"type", "thinking"},
                         {"thinking", *m.reasoning_content},
                         {"signature", ctx_.thinking_signer.sign(*m.reasoning_content)}});
    if (m.content) content.push_back({{"type", "text"}, {"text", *m.content}});
    for (const text::ToolCall& call : m.tool_calls) {
      auto input = parse_json(call.arguments, "arguments");
      content.push_back({{"type", "tool_use"},
                         {"id", tool_use_id(call.id)},
                         {"name", call.name},
                         {"input", input.ok() ? OrderedJson::parse(input->dump()) : OrderedJson::object()}});
    }
    const char* reason = stop_reason(!m.tool_calls.empty());
    OrderedJson j = {{"id", id_},
                     {"type", "message"},
                     {"role", "assistant"},
                     {"model", ctx_.model_name()},
                     {"content", std::move(content)},
                     {"stop_reason", reason},
                     {"stop_sequence", stop_string_},
                     {"usage", usage(output_tokens_)}};
    respond_json(j, reason);
  }

  void on_error(const ApiError& error) override {
    done_.store(true);
    if (!stream_) return respond_error(error);
    write_event("error", error_json(error, flavor_));
    writer_->end();
    log_done(error.status, "");
  }

  static constexpr std::chrono::seconds kPingSilence{2};

  ChatPrompt prompt_;
  std::atomic<bool> done_{false};  // read by the heartbeat thread
  Clock::time_point last_event_ = Clock::now();
  std::unique_ptr<text::AssistantStreamParser> parser_;
  std::string raw_;
  std::string thinking_;  // the open thinking block's text, to sign at its end
  bool started_ = false, has_tool_calls_ = false;
  int64_t prompt_tokens_seen_ = 0, cached_seen_ = 0;
  FinishReason finish_ = FinishReason::kNone;
  OrderedJson stop_string_;  // the stop sequence that ended the message, or null
  Block block_ = Block::kNone;
  int index_ = -1;
};

}  // namespace

void handle_messages(ServerContext& ctx, const HttpRequest& request, const OrderedJson& body,
                     std::shared_ptr<ResponseWriter> writer) {
  auto fail = [&](const Status& s) {
    respond_error(ctx, request, *writer, bad_request(s.message()), ApiFlavor::kAnthropic);
  };
  auto req = parse_anthropic_request(body, ctx.defaults, ctx.thinking_signer, false);
  if (!req.ok()) return fail(req.status());
  // Agents ask for more output than a small context can hold (Claude Code
  // sends 32000): the completion gets what the context has left.
  auto turn = build_chat_turn(req->chat_body, std::move(req->sampling), ctx, true);
  if (!turn.ok()) return fail(turn.status());
  std::vector<EngineJob> jobs;
  jobs.push_back(std::move(turn->job));
  auto gen =
      std::make_shared<MessagesGeneration>(ctx, std::move(writer), request, std::move(turn->prompt), req->stream);
  gen->start(std::move(jobs));
}

void handle_count_tokens(ServerContext& ctx, const HttpRequest& request, const OrderedJson& body,
                         std::shared_ptr<ResponseWriter> writer) {
  auto req = parse_anthropic_request(body, ctx.defaults, ctx.thinking_signer, true);
  Result<ChatPrompt> prompt = req.ok() ? build_chat_prompt(req->chat_body, *ctx.chat_template, *ctx.tokenizer)
                                       : Result<ChatPrompt>(req.status());
  if (!prompt.ok()) {
    return respond_error(ctx, request, *writer, bad_request(prompt.status().message()), ApiFlavor::kAnthropic);
  }
  HttpResponse r;
  r.body = dump_json({{"input_tokens", prompt->tokens.size()}});
  respond_logged(ctx, request, *writer, std::move(r));
}

}  // namespace m2::server
