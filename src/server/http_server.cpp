#include "server/http_server.h"

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <exception>
#include <optional>
#include <thread>

#include "server/http_session.h"
#include "util/log.h"

namespace m2::server {

namespace net = boost::asio;
namespace beast = boost::beast;

using tcp = net::ip::tcp;

std::string_view HttpRequest::header(std::string_view name) const {
  for (const auto& [k, v] : headers)
    if (k == name) return v;
  return {};
}

class HttpServer::Impl {
 public:
  Impl(const HttpServerConfig& config, HttpHandler handler)
      : config_(config), handler_(std::move(handler)), acceptor_(net::make_strand(ioc_)) {}

  // An IP address, or a host name ("localhost") resolved once, here: its
  // first IPv4 address, else its first.
  Result<net::ip::address> resolve() {
    beast::error_code ec;
    auto address = net::ip::make_address(config_.host, ec);
    if (!ec) return address;
    tcp::resolver resolver(ioc_);
    const auto results = resolver.resolve(config_.host, "", tcp::resolver::passive | tcp::resolver::address_configured, ec);
    if (ec || results.empty())
      return errorf("--host {}: neither an IP address nor a host name that resolves ({})", config_.host,
                    ec ? ec.message() : "no address");
    for (const auto& r : results)
      if (r.endpoint().address().is_v4()) return r.endpoint().address();
    return results.begin()->endpoint().address();
  }

  Status listen() {
    if (config_.port < 0 || config_.port > 65535) return errorf("--port {}: must be in [0, 65535]", config_.port);
    M2_ASSIGN_OR_RETURN(const net::ip::address address, resolve());
    loopback_ = address.is_loopback();
    beast::error_code ec;
    tcp::endpoint ep(address, static_cast<unsigned short>(config_.port));
    acceptor_.open(ep.protocol(), ec);
    if (!ec) acceptor_.set_option(net::socket_base::reuse_address(true), ec);
    if (!ec) acceptor_.bind(ep, ec);
    if (!ec) acceptor_.listen(net::socket_base::max_listen_connections, ec);
    if (ec) return errorf("cannot listen on {}:{}: {}", config_.host, config_.port, ec.message());
    port_ = acceptor_.local_endpoint().port();
    return Status();
  }

  // All on the acceptor's strand.
  void accept() {
    acceptor_.async_accept(net::make_strand(ioc_), [this](beast::error_code ec, tcp::socket socket) {
      if (ec == net::error::operation_aborted || !acceptor_.is_open()) return;
      if (ec) return accept_failed(ec);
      accept_delay_ = kMinAcceptDelay;
      if (connections_.load() >= config_.max_connections) {
        refuse(std::move(socket));
      } else {
        start_session(std::move(socket), sessions_);
      }
      accept();
    });
  }

  // Out of file descriptors (EMFILE, ENFILE) or kernel memory: the client
  // stays in the listen backlog and the listening socket stays readable, so
  // accepting again at once would spin. Back off (doubling up to 1 s) and
  // say so.
  void accept_failed(const beast::error_code& ec) {
    if (accept_log_.due())
      log_warn("accept failed: {} ({} connections open); retrying in {} ms{}", ec.message(), connections_.load(),
               accept_delay_.count(), accept_log_.suppressed_note());
    accept_timer_.expires_after(accept_delay_);
    accept_delay_ = std::min(accept_delay_ * 2, kMaxAcceptDelay);
    accept_timer_.async_wait([this](beast::error_code wait_ec) {
      if (!wait_ec && acceptor_.is_open()) accept();
    });
  }

  // At the connection cap: a short 503 written without waiting (it fits any
  // socket buffer), the client's bytes already received dropped (so that
  // closing does not reset the connection before it reads the answer), and
  // the socket closed at once, keeping nothing.
  void refuse(tcp::socket socket) {
    if (refuse_log_.due())
      log_warn("connection limit reached ({} open, --max-connections {}): refusing {} with 503{}", connections_.load(),
               config_.max_connections, remote(socket), refuse_log_.suppressed_note());
    const std::string body = fmt::format("the server has {} connections open, its limit; retry later\n",
                                         config_.max_connections);
    const std::string response = fmt::format(
        "HTTP/1.1 503 Service Unavailable\r\nServer: m2cpp\r\nContent-Type: text/plain\r\nRetry-After: {}\r\n"
        "Connection: close\r\nContent-Length: {}\r\n\r\n{}",
        config_.retry_after_s, body.size(), body);
    beast::error_code ec;
    socket.non_blocking(true, ec);
    socket.send(net::buffer(response), 0, ec);
    socket.shutdown(tcp::socket::shutdown_send, ec);
    char sink[4096];
    while (socket.receive(net::buffer(sink), 0, ec) > 0) {
    }
    socket.close(ec);
  }

  static std::string remote(const tcp::socket& socket) {
    beast::error_code ec;
    const auto ep = socket.remote_endpoint(ec);
    return ec ? std::string("?") : fmt::format("{}:{}", ep.address().to_string(), ep.port());
  }

  static constexpr std::chrono::milliseconds kMinAcceptDelay{10};
  static constexpr std::chrono::milliseconds kMaxAcceptDelay{1000};


  HttpServerConfig config_;
  HttpHandler handler_;
  // Declared before the io_context: sessions still queued in it when it is
  // destroyed decrement it from their destructors.
  std::atomic<size_t> connections_{0};
  BodyBudget bodies_{config_.max_inflight_body_bytes ? config_.max_inflight_body_bytes : SIZE_MAX};
  std::unique_ptr<ClientRateLimiter> rate_limiter_ =
      config_.rate_limit > 0 ? std::make_unique<ClientRateLimiter>(config_.rate_limit, config_.rate_limit_burst)
                             : nullptr;
  RateLimitedLog budget_log_, rate_log_;
  SessionContext sessions_{config_, handler_, connections_, bodies_, rate_limiter_.get(), budget_log_, rate_log_};
  net::io_context ioc_;
  tcp::acceptor acceptor_;
  net::steady_timer accept_timer_{acceptor_.get_executor()};
  std::chrono::milliseconds accept_delay_ = kMinAcceptDelay;
  RateLimitedLog accept_log_, refuse_log_;
  std::optional<net::executor_work_guard<net::io_context::executor_type>> work_;
  std::vector<std::thread> threads_;
  int port_ = 0;
  bool loopback_ = true;
};

Result<std::unique_ptr<HttpServer>> HttpServer::create(const HttpServerConfig& config, HttpHandler handler) {
  auto impl = std::make_unique<Impl>(config, std::move(handler));
  M2_RETURN_IF_ERROR(impl->listen());
  return std::unique_ptr<HttpServer>(new HttpServer(std::move(impl)));
}

HttpServer::HttpServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

HttpServer::~HttpServer() { stop(); }

int HttpServer::port() const { return impl_->port_; }

bool HttpServer::loopback() const { return impl_->loopback_; }

size_t HttpServer::num_connections() const { return impl_->connections_.load(); }

size_t HttpServer::body_bytes_in_flight() const { return impl_->bodies_.in_flight(); }

void HttpServer::start() {
  impl_->work_.emplace(impl_->ioc_.get_executor());
  impl_->accept();
  const int n = std::max(1, impl_->config_.io_threads);
  for (int i = 0; i < n; ++i) {
    impl_->threads_.emplace_back([this] {
      // A handler that throws (a bug) costs its connection, not the process:
      // the exception is logged and the thread goes back to serving.
      for (;;) {
        try {
          impl_->ioc_.run();
          return;
        } catch (const std::exception& e) {
          log_error("an I/O thread's handler threw: {}", e.what());
        }
      }
    });
  }
}

void HttpServer::stop_accepting() {
  net::post(impl_->acceptor_.get_executor(), [this] {
    beast::error_code ec;
    impl_->acceptor_.close(ec);
    impl_->accept_timer_.cancel();
  });
}

void HttpServer::stop() {
  if (impl_->threads_.empty()) return;
  impl_->work_.reset();
  impl_->ioc_.stop();
  for (auto& t : impl_->threads_) t.join();
  impl_->threads_.clear();
}

}  // namespace m2::server
