// The HTTP front of m2cpp serve: routes, authentication, errors, health and
// metrics over an HttpServer; generation goes through the ServerContext's
// engine loop.
//
// Routes: POST /v1/chat/completions, /v1/completions, /v1/responses,
// /v1/messages, /v1/messages/count_tokens, /tokenize, /detokenize; GET
// /v1/models, /v1/models/{name}, /health, /metrics, /version; GET / DELETE
// /v1/responses/{id}, GET /v1/responses/{id}/input_items, POST
// /v1/responses/{id}/cancel.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "server/api_error.h"
#include "server/http_server.h"
#include "server/server_context.h"
#include "server/work_queue.h"

namespace m2::server {

class Server {
 public:
  // Binds at once (so /health answers 503 while the model loads).
  static Result<std::unique_ptr<Server>> create(const HttpServerConfig& http, ServerContext& ctx);

  int port() const { return http_->port(); }
  void start() { http_->start(); }
  HttpServer& http() { return *http_; }
  // Drops the requests waiting for a request thread, joins those threads,
  // then stops the HTTP server (before the engine loop they submit to goes).
  void stop();

 private:
  using BodyHandler = void (*)(ServerContext&, const HttpRequest&, const OrderedJson&, std::shared_ptr<ResponseWriter>);

  explicit Server(ServerContext& ctx)
      : ctx_(ctx), work_(std::make_unique<WorkQueue>(ctx.options.request_threads, ctx.options.request_queue)) {}
  void handle(HttpRequest&& request, std::shared_ptr<ResponseWriter> writer);
  void guarded(const HttpRequest& request, const std::shared_ptr<ResponseWriter>& writer,
               const std::function<void()>& fn);
  void route(HttpRequest&& request, const std::shared_ptr<ResponseWriter>& writer);
  void serve_body(const HttpRequest& request, const std::shared_ptr<ResponseWriter>& writer, BodyHandler handler,
                  bool model_required);

  ServerContext& ctx_;
  std::unique_ptr<WorkQueue> work_;
  std::unique_ptr<HttpServer> http_;
};

// An API error answered to `request` in its route's shape (OpenAI or
// Anthropic), counted and logged; 503s carry Retry-After.
class ServerError {
 public:
  ServerError(ServerContext& ctx, const HttpRequest& request, ResponseWriter& writer);
  void operator()(int status, std::string message, std::string param = {}, std::string code = {}) const;

 private:
  ServerContext& ctx_;
  const HttpRequest& request_;
  ResponseWriter& writer_;
  ApiFlavor flavor_;
};

// Constant-time comparison (the time does not depend on where they differ).
bool secure_equals(std::string_view a, std::string_view b);

}  // namespace m2::server
