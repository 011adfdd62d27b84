#include "server/server.h"

#include <chrono>

#include "server/access_log.h"
#include "server/api_error.h"
#include "server/json_fields.h"
#include "server/request_headers.h"
#include "server/rollout_routes.h"
#include "server/routes.h"
#include "text/chat_request.h"
#include "util/log.h"
#include "util/version.h"

namespace m2::server {
namespace {

int64_t unix_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

bool needs_auth(const std::string& path) {
  return path.rfind("/v1/", 0) == 0 || path == "/tokenize" || path == "/detokenize";
}

OrderedJson model_card(const ServerContext& ctx, const std::string& name) {
  return {{"id", name},
          {"object", "model"},
          {"created", unix_now()},
          {"owned_by", "m2cpp"},
          {"root", ctx.options.model_root},  // the directory's name: clients need no server paths
          {"parent", nullptr},
          {"max_model_len", ctx.max_model_len},
          {"permission", OrderedJson::array()}};
}

HttpResponse json_response(const OrderedJson& j) {
  HttpResponse r;
  r.body = dump_json(j);
  return r;
}

// NIM's health answers: 200 when `ok`, else 503.
HttpResponse health_response(bool ok, const char* state) {
  HttpResponse r = json_response({{"object", "health.response"}, {"message", state}});
  r.status = ok ? 200 : 503;
  return r;
}

}  // namespace

bool secure_equals(std::string_view a, std::string_view b) {
  // Every byte of the longer string is looked at whatever the contents.
  const size_t n = std::max(a.size(), b.size());
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  for (size_t i = 0; i < n; ++i) {
    const unsigned char x = i < a.size() ? static_cast<unsigned char>(a[i]) : 0;
    const unsigned char y = i < b.size() ? static_cast<unsigned char>(b[i]) : 0;
    diff |= static_cast<unsigned char>(x ^ y);
  }
  return diff == 0;
}

std::string sse_data(const OrderedJson& j) { return "data: " + dump_json(j) + "\n\n"; }

void respond_logged(ServerContext& ctx, const HttpRequest& request, ResponseWriter& writer, HttpResponse response) {
  ctx.metrics.count_request(request.path, response.status);
  if (ctx.options.access_log) {
    AccessRecord r;
    r.remote = request.remote;
    r.method = request.method;
    r.path = request.path;
    r.x_request_id = request.request_id;
    r.status = response.status;
    log_access(r);
  }
  writer.respond(std::move(response));
}

void respond_error(ServerContext& ctx, const HttpRequest& request, ResponseWriter& writer, const ApiError& error,
                   ApiFlavor flavor) {
  ApiError e = error;
  e.request_id = request.request_id;
  respond_logged(ctx, request, writer, error_response(e, flavor));
}

Result<std::unique_ptr<Server>> Server::create(const HttpServerConfig& http, ServerContext& ctx) {
  std::unique_ptr<Server> server(new Server(ctx));
  Server* raw = server.get();
  M2_ASSIGN_OR_RETURN(server->http_,
                      HttpServer::create(http, [raw](HttpRequest&& request, std::shared_ptr<ResponseWriter> writer) {
                        raw->handle(std::move(request), std::move(writer));
                      }));
  return server;
}

void Server::handle(HttpRequest&& request, std::shared_ptr<ResponseWriter> writer) {
  request.request_id = choose_request_id(request);
  std::shared_ptr<ResponseWriter> w =
      std::make_shared<HeaderWriter>(std::move(writer), answer_headers(request, ctx_.options.allowed_origins));
  guarded(request, w, [&] { route(std::move(request), w); });
}

void Server::guarded(const HttpRequest& request, const std::shared_ptr<ResponseWriter>& writer,
                     const std::function<void()>& fn) {
  const ApiFlavor flavor = request.path.rfind("/v1/messages", 0) == 0 ? ApiFlavor::kAnthropic : ApiFlavor::kOpenAI;
  // No input may take the server down: whatever a handler throws becomes a
  // 500 (a bug: bad input gets a 400 naming the field). The exception's text
  // is logged, not sent: it names library internals, not the request's fault.
  try {
    fn();
  } catch (const std::exception& e) {
    log_error("{} {}: {}", request.method, request.path, e.what());
    ApiError error;
    error.status = 500;
    error.message = "internal error (logged by the server)";
    respond_error(ctx_, request, *writer, error, flavor);
  }
}

void Server::stop() {
  work_->stop();
  http_->stop();
}

ServerError::ServerError(ServerContext& ctx, const HttpRequest& request, ResponseWriter& writer)
    : ctx_(ctx),
      request_(request),
      writer_(writer),
      flavor_(request.path.rfind("/v1/messages", 0) == 0 ? ApiFlavor::kAnthropic : ApiFlavor::kOpenAI) {}

void ServerError::operator()(int status, std::string message, std::string param, std::string code) const {
  ApiError e;
  e.status = status;
  e.message = std::move(message);
  e.param = std::move(param);
  e.code = std::move(code);
  if (status == 503) e.retry_after_s = ctx_.options.retry_after_s;
  respond_error(ctx_, request_, writer_, e, flavor_);
}

// On the I/O thread: only what costs no more than a header lookup; a body
// to parse goes to the request threads.
void Server::route(HttpRequest&& request, const std::shared_ptr<ResponseWriter>& writer) {
  const std::string& path = request.path;
  const std::string& method = request.method;
  const ApiFlavor flavor = path.rfind("/v1/messages", 0) == 0 ? ApiFlavor::kAnthropic : ApiFlavor::kOpenAI;
  const ServerError error(ctx_, request, *writer);

  if (request.body_too_large) return error(413, "the request body is larger than the server accepts");
  if (is_preflight(request))  // before authentication: browsers send no key with a preflight
    return respond_logged(ctx_, request, *writer, preflight_response(request, ctx_.options.allowed_origins));
  if (path == "/v1/health/live") return respond_logged(ctx_, request, *writer, health_response(true, "live"));
  if (path == "/v1/health/ready") {
    const bool ready = ctx_.ready.load() && !ctx_.draining.load();
    HttpResponse r = health_response(ready, ready ? "ready" : ctx_.draining.load() ? "shutting down" : "loading");
    if (!ready) r.headers.emplace_back("Retry-After", std::to_string(ctx_.options.retry_after_s));
    return respond_logged(ctx_, request, *writer, std::move(r));
  }
  if (path == "/health") {
    HttpResponse r;
    r.content_type = "";
    if (!ctx_.ready.load() || ctx_.draining.load()) r.status = 503;
    if (r.status == 503) r.headers.emplace_back("Retry-After", std::to_string(ctx_.options.retry_after_s));
    return respond_logged(ctx_, request, *writer, std::move(r));
  }
  if ((path == "/metrics" || path == "/v1/metrics") && method == "GET") {
    HttpResponse r;
    r.content_type = "text/plain; version=0.0.4; charset=utf-8";
    r.body = ctx_.ready.load() ? ctx_.metrics.render(ctx_.loop->stats()) : std::string();
    return writer->respond(std::move(r));  // not counted: scrapes would dominate the request counts
  }
  if (path == "/version") return respond_logged(ctx_, request, *writer, json_response({{"version", kM2cppVersion}}));

  if (!ctx_.options.api_key.empty() && needs_auth(path)) {
    std::string_view key = request.header("x-api-key");
    const std::string_view auth = request.header("authorization");
    if (auth.size() > 7 && (auth.substr(0, 7) == "Bearer " || auth.substr(0, 7) == "bearer ")) key = auth.substr(7);
    if (!secure_equals(key, ctx_.options.api_key)) return error(401, "invalid or missing API key", "", "invalid_api_key");
  }
  // NIM's informational routes: what is served, known before the model loads.
  if (method == "GET" && path == "/v1/version")
    return respond_logged(ctx_, request, *writer, json_response({{"release", kM2cppVersion}, {"api", "1.0.0"}}));
  if (method == "GET" && path == "/v1/metadata") {
    OrderedJson models = OrderedJson::array();
    for (const auto& name : ctx_.options.served_model_names)
      if (!is_name_pattern(name)) models.push_back({{"shortName", name}, {"modelUrl", ctx_.options.model_root}});
    return respond_logged(ctx_, request, *writer,
                          json_response({{"version", kM2cppVersion}, {"modelInfo", std::move(models)},
                                         {"assetInfo", OrderedJson::array()}, {"licenseInfo", OrderedJson::object()},
                                         {"repository_override", ""}}));
  }
  if (!ctx_.ready.load()) return error(503, "the model is loading");
  if (is_rollout_route(path)) {
    // Off the I/O thread: an update reads and copies tensors.
    auto shared = std::make_shared<HttpRequest>(std::move(request));
    if (!work_->try_submit([this, shared, writer] { guarded(*shared, writer, [&] { handle_rollout_route(ctx_, shared, writer); }); }))
      return ServerError(ctx_, *shared, *writer)(503, "the server is busy reading other requests; retry later");
    return;
  }

  if (method == "GET" && path == "/v1/models") {
    OrderedJson data = OrderedJson::array();
    for (const auto& name : ctx_.options.served_model_names)
      if (!is_name_pattern(name)) data.push_back(model_card(ctx_, name));
    return respond_logged(ctx_, request, *writer, json_response({{"object", "list"}, {"data", std::move(data)}}));
  }
  if (method == "GET" && path.rfind("/v1/models/", 0) == 0) {
    const std::string name = path.substr(11);
    if (!ctx_.serves(name)) return error(404, "The model `" + name + "` does not exist.", "model", "model_not_found");
    return respond_logged(ctx_, request, *writer, json_response(model_card(ctx_, name)));
  }

  if (path.rfind("/v1/responses/", 0) == 0) return handle_response_resource(ctx_, request, writer);

  BodyHandler handler = nullptr;
  bool model_required = false;
  if (path == "/v1/chat/completions") handler = handle_chat_completions;
  else if (path == "/v1/completions") handler = handle_completions;
  else if (path == "/v1/responses") handler = handle_responses;
  else if (path == "/v1/messages") handler = handle_messages, model_required = true;
  else if (path == "/v1/messages/count_tokens") handler = handle_count_tokens, model_required = true;
  const bool tokenizer_route = path == "/tokenize" || path == "/detokenize";
  if (!handler && !tokenizer_route) return error(404, "no route for " + method + " " + path);
  if (method != "POST") {
    ApiError e = bad_request("use POST for " + path);
    e.status = 405;
    e.request_id = request.request_id;
    HttpResponse r = error_response(e, flavor);
    r.headers.emplace_back("Allow", "POST");  // RFC 9110 §15.5.6: a 405 names the methods that work
    return respond_logged(ctx_, request, *writer, std::move(r));
  }

  auto shared = std::make_shared<HttpRequest>(std::move(request));
  const bool queued = work_->try_submit([this, shared, writer, handler, model_required] {
    guarded(*shared, writer, [&] { serve_body(*shared, writer, handler, model_required); });
  });
  if (!queued)
    return ServerError(ctx_, *shared, *writer)(503, "the server is busy reading other requests; retry later");
}

// On a request thread: the body parsed, the model checked, the route's work
// up to the engine (a Generation then moves to the connection's strand).
void Server::serve_body(const HttpRequest& request, const std::shared_ptr<ResponseWriter>& writer,
                        BodyHandler handler, bool model_required) {
  const std::string& path = request.path;
  const ServerError error(ctx_, request, *writer);
  auto parsed = text::parse_ordered_json(request.body, "request body");
  if (!parsed.ok()) return error(400, parsed.status().message());
  const OrderedJson& body = *parsed;
  if (!body.is_object()) return error(400, std::string("the request body must be a JSON object, got ") + json_type(body));
  auto model = opt_string(body, "model");
  if (!model.ok()) return error(400, model.status().message(), "model");
  if (*model && !ctx_.serves(**model))
    return error(404, "The model `" + **model + "` does not exist.", "model", "model_not_found");
  if (!*model && model_required) return error(400, "model: Field required", "model");

  if (path == "/detokenize") {
    auto ids = opt_int_list(body, "tokens");
    if (!ids.ok()) return error(400, ids.status().message(), "tokens");
    std::vector<int32_t> tokens;
    for (int64_t id : *ids) {
      if (id < 0 || id >= ctx_.vocab_size) return error(400, fmt::format("token id {} is out of vocabulary", id), "tokens");
      tokens.push_back(static_cast<int32_t>(id));
    }
    auto text = ctx_.tokenizer->decode(tokens, false);
    if (!text.ok()) return error(400, text.status().message());
    return respond_logged(ctx_, request, *writer, json_response({{"prompt", *text}}));
  }
  if (path == "/tokenize") {
    auto add_special = opt_bool(body, "add_special_tokens");
    auto strs = opt_bool(body, "return_token_strs");
    if (!add_special.ok()) return error(400, add_special.status().message());
    if (!strs.ok()) return error(400, strs.status().message());
    Result<std::vector<int32_t>> ids = errorf("'prompt' or 'messages' is required");
    if (body.contains("messages")) {
      auto text = ctx_.chat_template->render_request(body);
      ids = text.ok() ? ctx_.tokenizer->encode(*text, add_special->value_or(false)) : Result<std::vector<int32_t>>(text.status());
    } else if (auto prompt = opt_string(body, "prompt"); !prompt.ok()) {
      ids = prompt.status();
    } else if (*prompt) {
      ids = ctx_.tokenizer->encode(**prompt, add_special->value_or(true));
    }
    if (!ids.ok()) return error(400, ids.status().message());
    OrderedJson j = {{"count", ids->size()}, {"max_model_len", ctx_.max_model_len}, {"tokens", *ids}};
    if (strs->value_or(false)) {
      OrderedJson s = OrderedJson::array();
      for (int32_t id : *ids) {
        auto t = ctx_.tokenizer->id_to_token(id);
        s.push_back(t ? std::string(*t) : std::string());
      }
      j["token_strs"] = std::move(s);
    } else {
      j["token_strs"] = nullptr;
    }
    return respond_logged(ctx_, request, *writer, json_response(j));
  }
  handler(ctx_, request, body, writer);
}

}  // namespace m2::server
