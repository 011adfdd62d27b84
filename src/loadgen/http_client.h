// A blocking HTTP/1.1 client over Boost.Beast for the serving benchmark: one
// per worker thread, one keep-alive connection each (reopened when the
// server closed it), streaming response bodies handed over piece by piece as
// they arrive, so that token timestamps are taken on arrival. interrupt()
// may be called from any thread and makes a blocked call return (Ctrl-C).
// Plain http only (an https proxy in front of a server is out of scope).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "util/status.h"

namespace m2::loadgen {

struct BaseUrl {
  std::string host;
  std::string port = "80";
  std::string prefix;  // path before the routes ("" or "/proxy/x"), no trailing '/'
};

// "http://host[:port][/prefix]"; a trailing "/v1" is dropped (routes are
// given from the root: /v1/completions, /tokenize, /metrics).
Result<BaseUrl> parse_base_url(std::string_view url);

struct HttpReply {
  int status = 0;
  std::string body;
};

class HttpClient {
 public:
  HttpClient(BaseUrl url, std::string api_key);
  ~HttpClient();
  HttpClient(const HttpClient&) = delete;
  HttpClient& operator=(const HttpClient&) = delete;

  Result<HttpReply> get(std::string_view path);
  Result<HttpReply> post(std::string_view path, const std::string& json_body);
  // POSTs and hands the response body to `on_data` (with the response's
  // HTTP status) piece by piece as it arrives; returns the status. Transport
  // failures (refused, reset, interrupted) are errors.
  using DataFn = std::function<void(int status, std::string_view piece)>;
  Result<int> post_streaming(std::string_view path, const std::string& json_body, const DataFn& on_data);
  // Thread-safe: the call in progress, and every later one, fail at once.
  void interrupt();

  class Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace m2::loadgen
