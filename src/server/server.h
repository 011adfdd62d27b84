// The HTTP front of m2cpp serve: routes, authentication, errors, health and
// metrics over an HttpServer; generation goes through the ServerContext's
// engine loop.
//
// Routes: POST /v1/chat/completions, /v1/completions, /v1/messages,
// /v1/messages/count_tokens, /tokenize, /detokenize; GET /v1/models,
// /v1/models/{name}, /health, /metrics, /version.
#pragma once

#include <memory>

#include "server/http_server.h"
#include "server/server_context.h"

namespace m2::server {

class Server {
 public:
  // Binds at once (so /health answers 503 while the model loads).
  static Result<std::unique_ptr<Server>> create(const HttpServerConfig& http, ServerContext& ctx);

  int port() const { return http_->port(); }
  void start() { http_->start(); }
  HttpServer& http() { return *http_; }

 private:
  Server(ServerContext& ctx) : ctx_(ctx) {}
  void handle(HttpRequest&& request, std::shared_ptr<ResponseWriter> writer);
  void route(HttpRequest& request, const std::shared_ptr<ResponseWriter>& writer);

  ServerContext& ctx_;
  std::unique_ptr<HttpServer> http_;
};

// Constant-time comparison (the time does not depend on where they differ).
bool secure_equals(std::string_view a, std::string_view b);

}  // namespace m2::server
