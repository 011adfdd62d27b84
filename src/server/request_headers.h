// What every answer carries besides its body: the request's id and, for
// browser pages of an allowed origin, CORS headers.
//  - Request id: the client's `x-request-id` when it is a plain token (up
//    to 128 of [A-Za-z0-9._:/+=-]), else a new "req_<hex>"; sent back as
//    `x-request-id` (OpenAI's SDK reads it) and `request-id` (Anthropic's),
//    and as `request_id` in error bodies (api_error.h).
//  - CORS (`--allowed-origins`, default none): a request whose `Origin` is
//    allowed gets Access-Control-Allow-Origin (that origin, or `*` when the
//    list holds `*`), Vary: Origin and the id headers exposed; a preflight
//    (OPTIONS with Origin and Access-Control-Request-Method) is answered
//    204 with the methods and the headers asked for, or 403 naming the
//    origin when it is not allowed. Preflights need no API key: browsers
//    send none with them.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "server/http_server.h"

namespace m2::server {

std::string choose_request_id(const HttpRequest& request);

// The Access-Control-Allow-Origin value for `origin`, or "" (not allowed).
std::string allowed_origin(const std::vector<std::string>& allowed, std::string_view origin);

bool is_preflight(const HttpRequest& request);
// The preflight's answer: 204 with the CORS headers, or 403 when the origin is not allowed.
HttpResponse preflight_response(const HttpRequest& request, const std::vector<std::string>& allowed);

// The headers added to every answer to `request` (id, CORS).
Headers answer_headers(const HttpRequest& request, const std::vector<std::string>& allowed);

// A writer that adds fixed headers to whatever response goes through it.
class HeaderWriter final : public ResponseWriter {
 public:
  HeaderWriter(std::shared_ptr<ResponseWriter> inner, Headers headers)
      : inner_(std::move(inner)), headers_(std::move(headers)) {}
  void respond(HttpResponse response) override;
  void begin_stream(int status, std::string content_type, Headers headers) override;
  void write(std::string data) override { inner_->write(std::move(data)); }
  void end() override { inner_->end(); }
  void post(std::function<void()> fn) override { inner_->post(std::move(fn)); }
  void on_disconnect(std::function<void()> fn) override { inner_->on_disconnect(std::move(fn)); }
  bool disconnected() const override { return inner_->disconnected(); }
  void on_backpressure(std::function<void(bool paused)> fn) override { inner_->on_backpressure(std::move(fn)); }

 private:
  std::shared_ptr<ResponseWriter> inner_;
  Headers headers_;
};

}  // namespace m2::server
