#include "server/http_session.h"

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include <algorithm>
#include <cmath>
#include <atomic>
#include <deque>
#include <optional>

#include "server/http_framing.h"
#include "util/log.h"

namespace m2::server {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = net::ip::tcp;

namespace {

const char* reason_phrase(int status) {
  return http::obsolete_reason(static_cast<http::status>(status)).data();  // NUL-terminated literals
}

// Beast 1.74 hands out boost::string_view.
template <typename View>
std::string str(const View& v) {
  return std::string(v.data(), v.size());
}

std::string lowercase(std::string out) {
  std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) { return std::tolower(c); });
  return out;
}

std::string status_line_and_headers(int status, const std::string& content_type, const Headers& headers,
                                    bool keep_alive) {
  std::string out = fmt::format("HTTP/1.1 {} {}\r\nServer: m2cpp\r\n", status, reason_phrase(status));
  if (!content_type.empty()) out += fmt::format("Content-Type: {}\r\n", content_type);
  for (const auto& [k, v] : headers) out += fmt::format("{}: {}\r\n", k, v);
  if (!keep_alive) out += "Connection: close\r\n";
  return out;
}

class Session;

// The writer of one exchange: forwards to its session on the strand.
class Exchange final : public ResponseWriter {
 public:
  Exchange(std::shared_ptr<Session> session, uint64_t serial) : session_(std::move(session)), serial_(serial) {}
  void respond(HttpResponse response) override;
  void begin_stream(int status, std::string content_type, Headers headers) override;
  void write(std::string data) override;
  void end() override;
  void post(std::function<void()> fn) override;
  void on_disconnect(std::function<void()> fn) override;
  void on_backpressure(std::function<void(bool paused)> fn) override;
  bool disconnected() const override { return gone_.load(); }

  std::atomic<bool> gone_{false};

 private:
  std::shared_ptr<Session> session_;
  uint64_t serial_;
};

class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(tcp::socket socket, SessionContext& server)
      : stream_(std::move(socket)), server_(server), stall_timer_(stream_.get_executor()) {
    beast::error_code ec;
    const auto ep = stream_.socket().remote_endpoint(ec);
    address_ = ec ? std::string("?") : ep.address().to_string();
    remote_ = ec ? std::string("?") : fmt::format("{}:{}", address_, ep.port());
    ++server_.connections;
  }
  ~Session() { --server_.connections; }

  auto executor() { return stream_.get_executor(); }

  void start() {
    net::dispatch(executor(), [self = shared_from_this()] { self->read_request(); });
  }

  // ---- called on the strand, for the current exchange only ----------------
  void respond(uint64_t serial, HttpResponse r) {
    if (serial != serial_ || state_ != State::kHandling) return;
    Headers headers = std::move(r.headers);
    headers.emplace_back("Content-Length", std::to_string(r.body.size()));
    std::string bytes = status_line_and_headers(r.status, r.content_type, headers, keep_alive_) + "\r\n";
    if (!head_only_) bytes += r.body;  // a HEAD response has no body, whatever its Content-Length
    state_ = State::kDone;
    enqueue(std::move(bytes));
  }

  void begin_stream(uint64_t serial, int status, const std::string& content_type, const Headers& headers) {
    if (serial != serial_ || state_ != State::kHandling) return;
    Headers h = headers;
    // An HTTP/1.0 client knows no chunked coding: its stream ends when the
    // connection closes.
    if (http10_) keep_alive_ = false;
    else h.emplace_back("Transfer-Encoding", "chunked");
    h.emplace_back("Cache-Control", "no-cache");
    state_ = State::kStreaming;
    enqueue(status_line_and_headers(status, content_type, h, keep_alive_) + "\r\n");
  }

  void write_chunk(uint64_t serial, std::string data) {
    if (serial != serial_ || state_ != State::kStreaming || data.empty() || head_only_) return;
    if (http10_) return enqueue(std::move(data));
    enqueue(fmt::format("{:x}\r\n", data.size()) + data + "\r\n");
  }

  void end_stream(uint64_t serial) {
    if (serial != serial_ || state_ != State::kStreaming) return;
    state_ = State::kDone;
    if (http10_ || head_only_) {
      if (!writing_) finish_exchange();
      return;
    }
    enqueue("0\r\n\r\n");
  }

  void set_on_backpressure(uint64_t serial, std::function<void(bool)> fn) {
    if (serial != serial_ || closed_) return;
    on_backpressure_ = std::move(fn);
    if (over_ && on_backpressure_) on_backpressure_(true);
  }

  void set_on_disconnect(uint64_t serial, std::function<void()> fn) {
    if (serial != serial_) return;
    if (closed_) {
      if (fn) fn();
      return;
    }
    on_disconnect_ = std::move(fn);
  }

 private:
  enum class State { kReading, kHandling, kStreaming, kDone };

  void read_request() {
    state_ = State::kReading;
    parser_.emplace();
    parser_->body_limit(server_.config.max_body_bytes);
    parser_->header_limit(static_cast<std::uint32_t>(server_.config.max_header_bytes));
    stream_.expires_after(server_.config.idle_timeout);
    http::async_read_header(stream_, buffer_, *parser_,
                            [self = shared_from_this()](beast::error_code ec, size_t) { self->on_header(ec); });
  }

  static bool connection_gone(const beast::error_code& ec) {
    return ec == http::error::end_of_stream || ec == net::error::operation_aborted || ec == beast::error::timeout ||
           ec == net::error::connection_reset || ec == net::error::eof;
  }

  // The head is in: its framing is checked (http_framing.h) before a byte of
  // the body is read, so a request whose length is ambiguous never leaves
  // bytes behind to be taken for the next request.
  void on_header(beast::error_code ec) {
    if (connection_gone(ec)) return close();
    if (ec == http::error::header_limit)
      return reject(431, fmt::format("the request head is larger than {} bytes", server_.config.max_header_bytes));
    if (ec == http::error::bad_version) {
      const auto bytes = buffer_.data();
      const std::string_view line(static_cast<const char*>(bytes.data()), std::min<size_t>(bytes.size(), 1024));
      const int status = refused_version_status(line);
      return reject(status, status == 505 ? "this HTTP version is not supported (HTTP/1.0 and HTTP/1.1 are)"
                                          : "bad HTTP request: " + ec.message());
    }
    // body_limit here: the Content-Length alone is over the limit (413 below).
    if (ec && ec != http::error::body_limit) return reject(400, "bad HTTP request: " + ec.message());
    auto& msg = parser_->get();
    RequestHead head;
    head.version = static_cast<int>(msg.version());
    head.method = str(msg.method_string());
    head.target = str(msg.target());
    for (const auto& field : msg) head.headers.emplace_back(lowercase(str(field.name_string())), str(field.value()));
    if (parser_->is_header_done()) {  // not after body_limit: Beast then stops before marking the head done
      head.parser_chunked = parser_->chunked();
      head.parser_has_length = parser_->content_length().has_value();
    }
    const FramingVerdict verdict = check_request_head(head);
    if (!verdict.ok()) return reject(verdict.status, verdict.message);

    request_ = HttpRequest();
    request_.remote = remote_;
    request_.method = std::move(head.method);
    request_.target = verdict.target;
    request_.path = verdict.path;
    request_.headers = std::move(head.headers);  // the head's only: trailers of a chunked body are not headers
    head_only_ = request_.method == "HEAD";
    http10_ = head.version < 11;
    keep_alive_ = msg.keep_alive();
    if (over_rate()) return;
    if (ec == http::error::body_limit) return body_too_large();
    // The body is charged to the server-wide budget before it is read: all
    // of a Content-Length at once (Beast reserves that much), a chunked body
    // as it grows (read_body).
    reservation_ = std::make_shared<BodyReservation>(server_.bodies);
    if (!reservation_->grow_to(std::max(msg.body().capacity(), size_t(parser_->content_length().value_or(0)))))
      return budget_full();
    if (parser_->is_done()) return dispatch();
    parser_->eager(true);
    if (!verdict.expects_continue) return read_body();
    static const std::string kContinue = "HTTP/1.1 100 Continue\r\n\r\n";
    net::async_write(stream_, net::buffer(kContinue), [self = shared_from_this()](beast::error_code ec, size_t) {
      if (ec) return self->close();
      self->read_body();
    });
  }

  // Piece by piece, so that a chunked body is charged to the budget as it
  // grows and refused once it no longer fits.
  void read_body() {
    http::async_read_some(stream_, buffer_, *parser_, [self = shared_from_this()](beast::error_code ec, size_t) {
      if (connection_gone(ec)) return self->close();
      if (ec == http::error::body_limit) return self->body_too_large();
      if (ec) return self->reject(400, "bad HTTP request body: " + ec.message());
      if (!self->reservation_->grow_to(self->parser_->get().body().capacity())) return self->budget_full();
      if (!self->parser_->is_done()) return self->read_body();
      self->dispatch();
    });
  }

  // Request bodies in flight over all connections would pass
  // --max-inflight-body-bytes: 503 now, before (more of) this one is read.
  void budget_full() {
    if (server_.budget_log.due())
      log_warn("request bodies in flight at the limit ({} of --max-inflight-body-bytes {} bytes): refusing a {}-byte "
               "body from {} with 503{}",
               server_.bodies.in_flight(), server_.bodies.limit(),
               std::max(reservation_->held(), size_t(parser_->content_length().value_or(0))), remote_,
               server_.budget_log.suppressed_note());
    reservation_.reset();
    reject(503, "the server holds too many request bodies at once; retry later",
           {{"Retry-After", std::to_string(server_.config.retry_after_s)}});
  }

  // The client's address is over --rate-limit: 429 with the seconds until
  // its next request may come. Monitoring paths (/health) are never limited.
  bool over_rate() {
    if (!server_.rate_limiter) return false;
    const auto& exempt = server_.config.rate_limit_exempt_paths;
    if (std::find(exempt.begin(), exempt.end(), request_.path) != exempt.end()) return false;
    const double wait = server_.rate_limiter->admit(address_);
    if (wait <= 0) return false;
    const int retry_after = std::max(1, static_cast<int>(std::ceil(wait)));
    if (server_.rate_log.due())
      log_warn("{}: over --rate-limit {} requests/s: {} {} refused with 429{}", remote_, server_.rate_limiter->rate(),
               request_.method, request_.path, server_.rate_log.suppressed_note());
    reject(429, fmt::format("too many requests from {}; retry in {} s", address_, retry_after),
           {{"Retry-After", std::to_string(retry_after)}});
    return true;
  }

  // The body is not read: the handler answers 413 and the connection closes.
  void body_too_large() {
    request_.body_too_large = true;
    keep_alive_ = false;
    dispatch();
  }

  // Malformed HTTP: there is no request to hand to the API layer. The
  // connection closes after the answer (what follows cannot be framed).
  void reject(int status, std::string message, Headers headers = {}) {
    parser_.reset();  // what was read of the body is never used: give its bytes back now
    reservation_.reset();
    keep_alive_ = false;
    head_only_ = false;
    state_ = State::kHandling;
    ++serial_;
    HttpResponse r;
    r.status = status;
    r.content_type = "text/plain";
    r.body = std::move(message) + "\n";
    r.headers = std::move(headers);
    respond(serial_, std::move(r));
  }

  void dispatch() {
    if (parser_ && !request_.body_too_large) request_.body = std::move(parser_->get().body());
    request_.body_reservation = std::move(reservation_);
    parser_.reset();
    state_ = State::kHandling;
    ++serial_;
    stream_.expires_never();
    auto exchange = std::make_shared<Exchange>(shared_from_this(), serial_);
    exchange_ = exchange;
    watch_disconnect(serial_);
    server_.handler(std::move(request_), std::move(exchange));
  }

  // While a response is being produced nothing is read from the socket, so
  // a readable socket means either the client closed it (EOF or reset: the
  // work behind the response is cancelled) or it pipelined its next
  // request (left unread for the parser).
  void watch_disconnect(uint64_t serial) {
    stream_.socket().async_wait(tcp::socket::wait_read, [self = shared_from_this(), serial](beast::error_code ec) {
      if (ec || serial != self->serial_ || self->state_ == State::kReading || self->closed_) return;
      char byte;
      beast::error_code peek_ec;
      self->stream_.socket().non_blocking(true, peek_ec);
      const size_t n = self->stream_.socket().receive(net::buffer(&byte, 1), tcp::socket::message_peek, peek_ec);
      if (peek_ec == net::error::would_block || peek_ec == net::error::try_again) return self->watch_disconnect(serial);
      if (!peek_ec && n > 0) return;  // a pipelined request: it waits for the parser
      self->close();
    });
  }

  void enqueue(std::string bytes) {
    if (closed_) return;
    out_bytes_ += bytes.size();
    out_.push_back(std::move(bytes));
    if (!over_ && out_bytes_ > server_.config.max_output_buffer_bytes) set_over(true);
    if (!writing_) write_next();
  }

  // Backpressure: over the cap the response's producer is told to pause
  // (the engine stops scheduling its sequences, which keep their KV blocks);
  // under half the cap, to go on. A client that does not drain the buffer
  // within the stall timeout loses the connection, which cancels the work
  // behind it and frees its KV blocks (on_disconnect).
  void set_over(bool over) {
    over_ = over;
    if (over) {
      stall_timer_.expires_after(server_.config.stall_timeout);
      stall_timer_.async_wait([self = shared_from_this()](beast::error_code ec) {
        if (ec || !self->over_ || self->closed_) return;
        log_warn("{}: closing the connection: its client took more than {} ms to read {} bytes of response",
                 self->remote_, self->server_.config.stall_timeout.count(), self->out_bytes_);
        self->close();
      });
    } else {
      stall_timer_.cancel();
    }
    if (on_backpressure_) on_backpressure_(over);
  }

  void write_next() {
    if (out_.empty()) {
      writing_ = false;
      if (state_ == State::kDone) finish_exchange();
      return;
    }
    writing_ = true;
    net::async_write(stream_, net::buffer(out_.front()), [self = shared_from_this()](beast::error_code ec, size_t) {
      self->writing_ = false;
      // close() keeps the queue while a write is in flight (the socket may
      // still be reading from out_.front() on another I/O thread); drop it here.
      if (ec || self->closed_) {
        self->out_.clear();
        self->out_bytes_ = 0;
        return self->close();
      }
      self->out_bytes_ -= self->out_.front().size();
      self->out_.pop_front();
      if (self->over_ && self->out_bytes_ <= self->server_.config.max_output_buffer_bytes / 2) self->set_over(false);
      self->write_next();
    });
  }

  void finish_exchange() {
    on_disconnect_ = nullptr;
    on_backpressure_ = nullptr;
    exchange_.reset();
    if (!keep_alive_) return linger();
    // Cancels the disconnect watch (its handler sees kReading and returns).
    beast::error_code ec;
    stream_.socket().cancel(ec);
    read_request();
  }

  // Closing a socket with unread input makes the kernel send a reset, which
  // can destroy the response before the client has read it (a 400 sent
  // while the rest of a bad request is still arriving). So the sending side
  // is shut first and the input read and dropped until the client closes,
  // kLingerBytes arrive or kLinger passes.
  void linger() {
    beast::error_code ec;
    stream_.socket().cancel(ec);  // the disconnect watch
    stream_.socket().shutdown(tcp::socket::shutdown_send, ec);
    if (ec) return close();
    linger_buffer_ = std::make_unique<char[]>(kLingerChunk);
    stream_.expires_after(kLinger);
    drain(0);
  }

  void drain(size_t drained) {
    stream_.async_read_some(net::buffer(linger_buffer_.get(), kLingerChunk),
                            [self = shared_from_this(), drained](beast::error_code ec, size_t n) {
                              if (ec || drained + n >= kLingerBytes) return self->close();
                              self->drain(drained + n);
                            });
  }

  void close() {
    if (closed_) return;
    closed_ = true;
    if (auto ex = exchange_.lock()) ex->gone_ = true;
    if (!writing_) {
      out_.clear();
      out_bytes_ = 0;
    }
    on_backpressure_ = nullptr;
    stall_timer_.cancel();
    beast::error_code ec;
    stream_.socket().close(ec);
    if (state_ != State::kDone && state_ != State::kReading && on_disconnect_) {
      auto fn = std::move(on_disconnect_);
      on_disconnect_ = nullptr;
      fn();
    }
  }

  beast::tcp_stream stream_;
  SessionContext& server_;
  std::string remote_;   // "ip:port"
  std::string address_;  // ip: the rate limit's key
  beast::flat_buffer buffer_;
  static constexpr size_t kLingerChunk = 4096;
  static constexpr size_t kLingerBytes = 1 << 20;
  static constexpr std::chrono::seconds kLinger{2};

  std::optional<http::request_parser<http::string_body>> parser_;
  HttpRequest request_;     // the one being read
  std::shared_ptr<BodyReservation> reservation_;  // its body's bytes, charged to the server's budget
  bool head_only_ = false;  // HEAD: headers without the body
  bool http10_ = false;     // an HTTP/1.0 client: no chunked coding, no keep-alive for streams
  std::unique_ptr<char[]> linger_buffer_;
  State state_ = State::kReading;
  uint64_t serial_ = 0;
  bool keep_alive_ = true;
  bool writing_ = false;
  bool closed_ = false;
  std::deque<std::string> out_;
  size_t out_bytes_ = 0;  // bytes in out_: queued, not yet sent
  bool over_ = false;     // out_bytes_ went over the cap and has not drained to half of it since
  net::steady_timer stall_timer_;
  std::function<void(bool)> on_backpressure_;
  std::function<void()> on_disconnect_;
  std::weak_ptr<Exchange> exchange_;
};

void Exchange::respond(HttpResponse response) {
  net::post(session_->executor(), [s = session_, serial = serial_, r = std::move(response)]() mutable {
    s->respond(serial, std::move(r));
  });
}

void Exchange::begin_stream(int status, std::string content_type, Headers headers) {
  net::post(session_->executor(), [s = session_, serial = serial_, status, ct = std::move(content_type),
                                   h = std::move(headers)] { s->begin_stream(serial, status, ct, h); });
}

void Exchange::write(std::string data) {
  net::post(session_->executor(),
            [s = session_, serial = serial_, d = std::move(data)]() mutable { s->write_chunk(serial, std::move(d)); });
}

void Exchange::end() {
  net::post(session_->executor(), [s = session_, serial = serial_] { s->end_stream(serial); });
}

void Exchange::post(std::function<void()> fn) { net::post(session_->executor(), std::move(fn)); }

void Exchange::on_disconnect(std::function<void()> fn) {
  net::post(session_->executor(),
            [s = session_, serial = serial_, f = std::move(fn)]() mutable { s->set_on_disconnect(serial, std::move(f)); });
}

void Exchange::on_backpressure(std::function<void(bool)> fn) {
  net::post(session_->executor(), [s = session_, serial = serial_, f = std::move(fn)]() mutable {
    s->set_on_backpressure(serial, std::move(f));
  });
}

}  // namespace

void start_session(tcp::socket socket, SessionContext& context) {
  beast::error_code ec;
  socket.set_option(tcp::no_delay(true), ec);  // SSE events are small: send each at once
  std::make_shared<Session>(std::move(socket), context)->start();
}

}  // namespace m2::server
