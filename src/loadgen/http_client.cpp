#include "loadgen/http_client.h"

#include <sys/socket.h>

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>
#include <limits>
#include <mutex>

namespace m2::loadgen {

namespace asio = boost::asio;
namespace http = boost::beast::http;
using tcp = asio::ip::tcp;
using boost::system::error_code;

Result<BaseUrl> parse_base_url(std::string_view url) {
  BaseUrl u;
  if (url.rfind("https://", 0) == 0)
    return errorf("{}: https is not supported by the benchmark client (use http://)", url);
  if (url.rfind("http://", 0) != 0) return errorf("{}: the base URL must start with http://", url);
  std::string_view rest = url.substr(7);
  const size_t slash = rest.find('/');
  std::string_view authority = rest.substr(0, slash);
  std::string_view path = slash == std::string_view::npos ? std::string_view() : rest.substr(slash);
  while (!path.empty() && path.back() == '/') path.remove_suffix(1);
  if (path.size() >= 3 && path.substr(path.size() - 3) == "/v1") path.remove_suffix(3);
  u.prefix = std::string(path);
  if (!authority.empty() && authority.front() == '[') {  // [IPv6]:port
    const size_t close = authority.find(']');
    if (close == std::string_view::npos) return errorf("{}: unterminated IPv6 address", url);
    u.host = std::string(authority.substr(1, close - 1));
    authority.remove_prefix(close + 1);
    if (!authority.empty() && authority.front() == ':') u.port = std::string(authority.substr(1));
  } else {
    const size_t colon = authority.rfind(':');
    u.host = std::string(authority.substr(0, colon));
    if (colon != std::string_view::npos) u.port = std::string(authority.substr(colon + 1));
  }
  if (u.host.empty()) return errorf("{}: no host", url);
  if (u.port.empty() || u.port.find_first_not_of("0123456789") != std::string::npos)
    return errorf("{}: bad port '{}'", url, u.port);
  return u;
}

class HttpClient::Impl {
 public:
  Impl(BaseUrl url, std::string api_key) : url_(std::move(url)), api_key_(std::move(api_key)) {}

  Result<int> exchange(http::verb verb, std::string_view path, const std::string& body,
                       const DataFn& on_data) {
    http::request<http::string_body> req(verb, url_.prefix + std::string(path), 11);
    req.set(http::field::host, url_.host + ":" + url_.port);
    req.set(http::field::user_agent, "m2cpp-bench");
    if (!api_key_.empty()) req.set(http::field::authorization, "Bearer " + api_key_);
    if (verb == http::verb::post) {
      req.set(http::field::content_type, "application/json");
      req.body() = body;
      req.prepare_payload();
    }
    // A kept-alive connection the server has closed fails on first use: retry once on a fresh one.
    for (int attempt = 0;; ++attempt) {
      const bool reused = socket_.is_open();
      if (!reused) M2_RETURN_IF_ERROR(connect());
      http::response_parser<http::buffer_body> parser;
      // Not boost::none: Boost 1.74 compares a Content-Length against the
      // optional itself, and any length exceeds `none`.
      parser.body_limit(std::numeric_limits<std::uint64_t>::max());
      error_code ec;
      http::write(socket_, req, ec);
      if (!ec) http::read_header(socket_, buffer_, parser, ec);
      if (ec) {
        close();
        if (reused && attempt == 0 && !interrupted()) continue;
        return transport_error(ec);
      }
      const int status = parser.get().result_int();
      char chunk[16384];
      while (!parser.is_done()) {
        parser.get().body().data = chunk;
        parser.get().body().size = sizeof(chunk);
        http::read_some(socket_, buffer_, parser, ec);
        if (ec == http::error::need_buffer) ec = {};
        if (ec) {
          close();
          return transport_error(ec);
        }
        const size_t n = sizeof(chunk) - parser.get().body().size;
        if (n > 0) on_data(status, std::string_view(chunk, n));
      }
      if (!parser.keep_alive()) close();
      return status;
    }
  }

  void interrupt() {
    std::lock_guard<std::mutex> lock(mu_);
    interrupted_ = true;
    if (fd_ >= 0) ::shutdown(fd_, SHUT_RDWR);
  }

 private:
  bool interrupted() {
    std::lock_guard<std::mutex> lock(mu_);
    return interrupted_;
  }

  Status transport_error(const error_code& ec) {
    if (interrupted()) return errorf("interrupted");
    return errorf("{}:{}: {}", url_.host, url_.port, ec.message());
  }

  Status connect() {
    if (interrupted()) return errorf("interrupted");
    error_code ec;
    tcp::resolver resolver(ioc_);
    auto endpoints = resolver.resolve(url_.host, url_.port, ec);
    if (!ec) asio::connect(socket_, endpoints, ec);
    if (ec) {
      const std::string why = ec.message();
      socket_.close(ec);
      return errorf("cannot connect to {}:{}: {}", url_.host, url_.port, why);
    }
    socket_.set_option(tcp::no_delay(true), ec);
    buffer_.clear();
    std::lock_guard<std::mutex> lock(mu_);
    fd_ = socket_.native_handle();
    if (interrupted_) ::shutdown(fd_, SHUT_RDWR);
    return Status();
  }

  void close() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      fd_ = -1;
    }
    error_code ec;
    socket_.close(ec);
    buffer_.clear();
  }

  BaseUrl url_;
  std::string api_key_;
  asio::io_context ioc_;
  tcp::socket socket_{ioc_};
  boost::beast::flat_buffer buffer_;
  std::mutex mu_;  // guards fd_ and interrupted_ (interrupt() comes from another thread)
  int fd_ = -1;
  bool interrupted_ = false;
};

HttpClient::HttpClient(BaseUrl url, std::string api_key)
    : impl_(std::make_unique<Impl>(std::move(url), std::move(api_key))) {}
HttpClient::~HttpClient() = default;

Result<HttpReply> HttpClient::get(std::string_view path) {
  HttpReply reply;
  auto status = impl_->exchange(http::verb::get, path, {}, [&](int, std::string_view d) { reply.body += d; });
  if (!status.ok()) return status.status();
  reply.status = *status;
  return reply;
}

Result<HttpReply> HttpClient::post(std::string_view path, const std::string& json_body) {
  HttpReply reply;
  auto status = impl_->exchange(http::verb::post, path, json_body, [&](int, std::string_view d) { reply.body += d; });
  if (!status.ok()) return status.status();
  reply.status = *status;
  return reply;
}

Result<int> HttpClient::post_streaming(std::string_view path, const std::string& json_body,
                                       const DataFn& on_data) {
  return impl_->exchange(http::verb::post, path, json_body, on_data);
}

void HttpClient::interrupt() { impl_->interrupt(); }

}  // namespace m2::loadgen
