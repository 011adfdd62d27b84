// POST /v1/responses: OpenAI's Responses API over the chat path (the body
// converted by responses_request.h, the prompt, tools, thinking and
// sampling of build_chat_turn), its output as items (responses_output.h),
// whole or streamed as numbered events: response.created and
// response.in_progress once the request is queued (so a client sees the
// stream alive before the prefill), the items' events, then
// response.completed, response.incomplete (max_output_tokens) or
// response.failed. A finished response is stored (response_store.h) unless
// `store` is false; GET and DELETE /v1/responses/{id} and its input_items
// read the store; cancel answers 400, since only background responses can
// be cancelled and this server runs none (`background: true` is refused).
#include <algorithm>
#include <atomic>
#include <chrono>
#include <optional>

#include "server/chat_prompt.h"
#include "server/generation.h"
#include "server/json_fields.h"
#include "server/responses_output.h"
#include "server/responses_request.h"
#include "server/routes.h"

namespace m2::server {
namespace {

class ResponsesGeneration final : public Generation {
 public:
  ResponsesGeneration(ServerContext& ctx, std::shared_ptr<ResponseWriter> writer, const HttpRequest& request,
                      ResponsesRequest r, ChatPrompt prompt, OrderedJson conversation)
      : Generation(ctx, std::move(writer), request, ApiFlavor::kOpenAI, "resp_" + random_hex(24), r.stream),
        r_(std::move(r)),
        prompt_(std::move(prompt)),
        conversation_(std::move(conversation)),
        parser_(prompt_.parse),
        output_(r_.summary, r_.encrypted_reasoning ? &ctx.thinking_signer : nullptr,
                r_.stream ? ResponsesOutput::Sink([this](OrderedJson e) { write_event(std::move(e)); })
                          : ResponsesOutput::Sink()) {}

 private:
  void write_event(OrderedJson e) {
    e["sequence_number"] = sequence_++;
    writer_->write("event: " + e["type"].get<std::string>() + "\ndata: " + dump_json(e) + "\n\n");
    last_event_ = Clock::now();
  }

  // While the request waits or its prompt is prefilled nothing else is
  // sent: an SSE comment (which SSE clients skip) after every kKeepAlive
  // of silence keeps proxies with idle timeouts from closing the stream.
  void keep_alive() {
    std::weak_ptr<Generation> weak = weak_from_this();
    std::weak_ptr<ResponseWriter> writer = writer_;
    ctx_.heartbeat.add([weak, writer, &ctx = ctx_] {
      auto self = std::static_pointer_cast<ResponsesGeneration>(weak.lock());
      auto w = writer.lock();
      if (!self || !w || self->done_.load() || w->disconnected() || ctx.draining.load()) return false;
      w->post([self] {
        if (!self->done_.load() && Clock::now() - self->last_event_ >= kKeepAlive) {
          self->writer_->write(": keep-alive\n\n");
          self->last_event_ = Clock::now();
        }
      });
      return true;
    });
  }

  OrderedJson usage() const {
    return {{"input_tokens", prompt_tokens_},
            {"input_tokens_details", {{"cached_tokens", cached_tokens_}}},
            {"output_tokens", output_tokens_},
            {"output_tokens_details", {{"reasoning_tokens", reasoning_tokens_}}},
            {"total_tokens", prompt_tokens_ + output_tokens_}};
  }

  // The response object; `status`: in_progress, completed, incomplete, failed.
  OrderedJson response(const char* status, OrderedJson error = nullptr) const {
    const OrderedJson& e = r_.echo;
    auto or_default = [&](const char* key, OrderedJson d) { return e[key].is_null() ? d : e[key]; };
    const bool done = std::string_view(status) != "in_progress";
    OrderedJson j = OrderedJson::object();
    j["id"] = id_;
    j["object"] = "response";
    j["created_at"] = created_;
    j["status"] = status;
    j["background"] = false;
    j["error"] = std::move(error);
    j["incomplete_details"] =
        std::string_view(status) == "incomplete" ? OrderedJson{{"reason", "max_output_tokens"}} : OrderedJson(nullptr);
    j["instructions"] = e["instructions"];
    j["max_output_tokens"] = e["max_output_tokens"];
    j["max_tool_calls"] = nullptr;
    j["metadata"] = or_default("metadata", OrderedJson::object());
    j["model"] = ctx_.model_name();
    j["output"] = done ? output_.items() : OrderedJson::array();
    j["parallel_tool_calls"] = or_default("parallel_tool_calls", true);
    j["previous_response_id"] = e["previous_response_id"];
    j["reasoning"] = or_default("reasoning", OrderedJson{{"effort", nullptr}, {"summary", nullptr}});
    j["service_tier"] = "default";
    j["store"] = r_.store;
    j["temperature"] = or_default("temperature", r_.sampling.params.temperature);
    j["text"] = or_default("text", OrderedJson{{"format", {{"type", "text"}}}});
    j["tool_choice"] = or_default("tool_choice", "auto");
    j["tools"] = or_default("tools", OrderedJson::array());
    j["top_p"] = or_default("top_p", r_.sampling.params.top_p);
    j["truncation"] = "disabled";
    j["usage"] = done ? usage() : OrderedJson(nullptr);
    j["user"] = e["user"];
    return j;
  }

  void on_admitted() override {
    if (!stream_) return;
    writer_->begin_stream(200, "text/event-stream", {});
    write_event({{"type", "response.created"}, {"response", response("in_progress")}});
    write_event({{"type", "response.in_progress"}, {"response", response("in_progress")}});
    keep_alive();
  }

  void on_output(size_t, RequestOutput& o) override {
    if (prompt_.reasoning_end_token >= 0)
      reasoning_tokens_ += count_reasoning_tokens(o.new_token_ids, prompt_.reasoning_end_token, &reasoning_done_);
    output_.add(parser_.feed(o.new_text));
    if (o.finished) {
      output_.add(parser_.finish());
      incomplete_ = o.finish_reason == FinishReason::kLength;
      output_.finish(incomplete_);
    }
  }

  void on_complete() override {
    done_.store(true);
    const char* status = incomplete_ ? "incomplete" : "completed";
    const OrderedJson j = response(status);
    if (r_.store) {
      StoredResponse s;
      s.response = j;
      s.input_items = r_.input_items;
      s.conversation = std::move(conversation_);
      s.conversation.push_back(output_.chat_message());
      ctx_.responses.put(id_, std::move(s));
    }
    const char* finish = incomplete_ ? "length" : output_.has_function_calls() ? "tool_calls" : "stop";
    if (!stream_) return respond_json(j, finish);
    write_event({{"type", incomplete_ ? "response.incomplete" : "response.completed"}, {"response", j}});
    writer_->end();
    log_done(200, finish);
  }

  void on_error(const ApiError& error) override {
    done_.store(true);
    if (!stream_) return respond_error(error);
    output_.finish(true);
    write_event({{"type", "response.failed"},
                 {"response", response("failed", {{"code", "server_error"}, {"message", error.message}})}});
    writer_->end();
    log_done(error.status, "");
  }

  ResponsesRequest r_;
  ChatPrompt prompt_;
  OrderedJson conversation_;  // the chat messages before this response's output
  text::AssistantStreamParser parser_;
  ResponsesOutput output_;
  static constexpr std::chrono::seconds kKeepAlive{5};
  std::atomic<bool> done_{false};  // read by the heartbeat thread
  Clock::time_point last_event_ = Clock::now();
  int64_t sequence_ = 0;
  int64_t reasoning_tokens_ = 0;
  bool reasoning_done_ = false;
  bool incomplete_ = false;
};

// A query parameter of `target` ("" when absent). Values are ids, numbers
// and words here, so no percent-decoding is needed: an encoded one just
// matches nothing.
std::optional<std::string> query_param(const std::string& target, std::string_view key) {
  const size_t q = target.find('?');
  if (q == std::string::npos) return std::nullopt;
  std::string_view rest = std::string_view(target).substr(q + 1);
  while (!rest.empty()) {
    const size_t amp = rest.find('&');
    const std::string_view pair = rest.substr(0, amp);
    const size_t eq = pair.find('=');
    if (pair.substr(0, eq) == key) return std::string(eq == std::string_view::npos ? "" : pair.substr(eq + 1));
    if (amp == std::string_view::npos) break;
    rest.remove_prefix(amp + 1);
  }
  return std::nullopt;
}

// GET .../input_items: OpenAI's list page (order desc and limit 20 by default, `after` an item id).
Result<OrderedJson> input_items_page(const OrderedJson& items, const std::string& target) {
  const std::string order = query_param(target, "order").value_or("desc");
  if (order != "asc" && order != "desc") return errorf("'order' must be 'asc' or 'desc', got '{}'", order);
  int limit = 20;
  if (auto l = query_param(target, "limit")) {
    size_t used = 0;
    try {
      limit = std::stoi(*l, &used);
    } catch (...) {
      used = 0;
    }
    if (used == 0 || used != l->size() || limit < 1 || limit > 100)
      return errorf("'limit' must be an integer in 1..100, got '{}'", *l);
  }
  OrderedJson ordered = OrderedJson::array();
  for (const auto& item : items) ordered.push_back(item);
  if (order == "desc") std::reverse(ordered.begin(), ordered.end());
  size_t start = 0;
  if (auto after = query_param(target, "after")) {
    while (start < ordered.size() && ordered[start]["id"] != *after) ++start;
    if (start == ordered.size()) return errorf("'after': no input item '{}' in this response", *after);
    ++start;
  }
  OrderedJson data = OrderedJson::array();
  for (size_t i = start; i < ordered.size() && data.size() < static_cast<size_t>(limit); ++i)
    data.push_back(ordered[i]);
  const bool more = start + data.size() < ordered.size();
  return OrderedJson{{"object", "list"},
                     {"data", data},
                     {"first_id", data.empty() ? OrderedJson(nullptr) : data.front()["id"]},
                     {"last_id", data.empty() ? OrderedJson(nullptr) : data.back()["id"]},
                     {"has_more", more}};
}

}  // namespace

void handle_responses(ServerContext& ctx, const HttpRequest& request, const OrderedJson& body,
                      std::shared_ptr<ResponseWriter> writer) {
  auto fail = [&](const Status& s, std::string param = {}) {
    respond_error(ctx, request, *writer, bad_request(s.message(), std::move(param)), ApiFlavor::kOpenAI);
  };
  auto previous_id = previous_response_id(body);
  if (!previous_id.ok()) return fail(previous_id.status(), "previous_response_id");
  OrderedJson previous;
  if (!previous_id->empty()) {
    auto stored = ctx.responses.get(*previous_id);
    if (!stored) {
      ApiError e;
      e.status = 404;
      e.message = "Previous response with id '" + *previous_id + "' not found.";
      e.param = "previous_response_id";
      e.code = "previous_response_not_found";
      return respond_error(ctx, request, *writer, e, ApiFlavor::kOpenAI);
    }
    previous = std::move(stored->conversation);
  }
  auto r = parse_responses_request(body, ctx.defaults, previous, ctx.thinking_signer);
  if (!r.ok()) return fail(r.status());
  // Agents ask for more output than a small context holds: as for Anthropic,
  // the response gets what the context has left.
  auto turn = build_chat_turn(r->chat_body, r->sampling, ctx, true);
  if (!turn.ok()) return fail(turn.status());
  turn->prompt.parse.reasoning = text::ReasoningMode::kSplit;  // reasoning items are the native form
  OrderedJson conversation = previous.is_array() ? std::move(previous) : OrderedJson::array();
  for (const auto& m : r->new_messages) conversation.push_back(m);
  std::vector<EngineJob> jobs;
  jobs.push_back(std::move(turn->job));
  auto gen = std::make_shared<ResponsesGeneration>(ctx, std::move(writer), request, std::move(*r),
                                                   std::move(turn->prompt), std::move(conversation));
  gen->start(std::move(jobs));
}

void handle_response_resource(ServerContext& ctx, const HttpRequest& request,
                              const std::shared_ptr<ResponseWriter>& writer) {
  // /v1/responses/{id}[/cancel | /input_items]
  std::string rest = request.path.substr(std::string_view("/v1/responses/").size());
  std::string action;
  if (const size_t slash = rest.find('/'); slash != std::string::npos) {
    action = rest.substr(slash + 1);
    rest.resize(slash);
  }
  const std::string& id = rest;
  auto error = [&](int status, std::string message, std::string code = {}) {
    ApiError e;
    e.status = status;
    e.message = std::move(message);
    e.code = std::move(code);
    respond_error(ctx, request, *writer, e, ApiFlavor::kOpenAI);
  };
  auto json = [&](const OrderedJson& j) {
    HttpResponse r;
    r.body = dump_json(j);
    respond_logged(ctx, request, *writer, std::move(r));
  };
  const std::string& method = request.method;
  const bool get = method == "GET" || method == "HEAD";
  const bool known = (action.empty() && (get || method == "DELETE")) || (action == "cancel" && method == "POST") ||
                     (action == "input_items" && get);
  if (!known) {
    if (action.empty() || action == "cancel" || action == "input_items") {
      ApiError e = bad_request("use " +
                               std::string(action.empty()       ? "GET or DELETE"
                                           : action == "cancel" ? "POST"
                                                                : "GET") +
                               " for " + request.path);
      e.status = 405;
      e.request_id = request.request_id;
      HttpResponse r = error_response(e, ApiFlavor::kOpenAI);
      r.headers.emplace_back("Allow", action.empty() ? "GET, DELETE" : action == "cancel" ? "POST" : "GET");
      return respond_logged(ctx, request, *writer, std::move(r));
    }
    return error(404, "no route for " + method + " " + request.path);
  }
  const std::string not_found = "Response with id '" + id + "' not found.";
  if (method == "DELETE") {
    if (!ctx.responses.erase(id)) return error(404, not_found, "not_found");
    return json({{"id", id}, {"object", "response.deleted"}, {"deleted", true}});
  }
  auto stored = ctx.responses.get(id);
  if (!stored) return error(404, not_found, "not_found");
  if (action == "cancel")
    return error(400,
                 "Only responses created with background=true can be cancelled (this server runs no background "
                 "responses; this one has finished).");
  if (action == "input_items") {
    auto page = input_items_page(stored->input_items, request.target);
    if (!page.ok()) return error(400, page.status().message());
    return json(*page);
  }
  json(stored->response);
}

}  // namespace m2::server
