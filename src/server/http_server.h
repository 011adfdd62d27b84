// HTTP/1.1 over asynchronous I/O (Boost.Beast/Asio, kept out of this
// header): a few I/O threads serve every connection, each connection on its
// own strand, so hundreds of open streams cost sockets and buffers, not
// threads. Keep-alive, chunked streaming responses, a body-size limit, and
// detection of a client that goes away while its response is still being
// produced (the handler then cancels the work behind it). Bounded by
// construction: a connection cap (503 past it), an accept loop that backs
// off when file descriptors run out, per-connection output buffers with
// backpressure and a stall timeout (http_session.h).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "util/status.h"

namespace m2::server {

class BodyReservation;  // request_limits.h

using Headers = std::vector<std::pair<std::string, std::string>>;

struct HttpRequest {
  std::string method;
  std::string target;          // as sent, query included
  std::string path;            // target without the query
  Headers headers;             // names lowercased
  std::string body;
  std::string remote;          // "ip:port" of the client
  bool body_too_large = false; // the body passed the limit and was not read (answer 413)
  std::string request_id;      // set by the server's router (request_headers.h)
  // The body's bytes as charged to the server-wide budget (request_limits.h),
  // given back when the request, and so its body, is destroyed.
  std::shared_ptr<BodyReservation> body_reservation;

  // First value of a header (name in lowercase), or "".
  std::string_view header(std::string_view name) const;
};

struct HttpResponse {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  Headers headers;
};

// The answer to one request. Every method may be called from any thread;
// the work is done on the connection's strand, in call order.
class ResponseWriter {
 public:
  virtual ~ResponseWriter() = default;
  // A whole response. Later calls are ignored.
  virtual void respond(HttpResponse response) = 0;
  // Starts a chunked response (e.g. text/event-stream); then write()s, then end().
  virtual void begin_stream(int status, std::string content_type, Headers headers) = 0;
  virtual void write(std::string data) = 0;
  virtual void end() = 0;
  // Runs `fn` on the connection's strand after what was posted before.
  virtual void post(std::function<void()> fn) = 0;
  // `fn` runs once, on the strand, if the client goes away before the
  // response has been sent in full.
  virtual void on_disconnect(std::function<void()> fn) = 0;
  // True once the client is known to be gone.
  virtual bool disconnected() const = 0;
  // Flow control: `fn(true)` runs on the strand when more than
  // max_output_buffer_bytes of the response wait to be sent (the client
  // reads slower than the response is produced), `fn(false)` once half of
  // that is left. Past stall_timeout over the cap the connection closes
  // (on_disconnect runs).
  virtual void on_backpressure(std::function<void(bool paused)> fn) = 0;
};

// Called on the connection's strand; answers through the writer, at once or later.
using HttpHandler = std::function<void(HttpRequest&& request, std::shared_ptr<ResponseWriter> writer)>;

struct HttpServerConfig {
  std::string host = "127.0.0.1";  // an IP address or a host name
  int port = 8000;               // 0: any free port (see HttpServer::port())
  int io_threads = 2;
  size_t max_body_bytes = 32u << 20;
  std::chrono::seconds idle_timeout{75};  // a connection idle between requests, or slow to send one
  size_t max_header_bytes = 64u << 10;    // a request head (request line + headers) larger gets 431
  // Connections open at once; one more gets a 503 and is closed (a log
  // line says so, at most once a second).
  size_t max_connections = 1024;
  int retry_after_s = 1;  // Retry-After of that 503
  // Response bytes a connection may hold unsent before its producer is told
  // to pause (ResponseWriter::on_backpressure); it resumes at half.
  size_t max_output_buffer_bytes = 256u << 10;
  // A connection over that cap for this long is closed (its work cancelled).
  std::chrono::milliseconds stall_timeout{60000};
  // Request-body bytes held at once over all connections (received, queued,
  // being parsed); a body that does not fit gets 503 + Retry-After. 0: no limit.
  size_t max_inflight_body_bytes = 256u << 20;
  // Requests a second per client address, in bursts of up to
  // rate_limit_burst (0: max(1, rate)); past it 429 + Retry-After. 0: no limit.
  // Paths a monitor polls are exempt.
  double rate_limit = 0;
  double rate_limit_burst = 0;
  std::vector<std::string> rate_limit_exempt_paths = {"/health", "/metrics"};
};

class HttpServer {
 public:
  // Binds and listens; serves nothing until start().
  static Result<std::unique_ptr<HttpServer>> create(const HttpServerConfig& config, HttpHandler handler);
  ~HttpServer();

  int port() const;
  // The bound address is a loopback one (127.0.0.0/8, ::1): no other machine can connect.
  bool loopback() const;
  void start();
  // Closes the listening socket: new connections are refused; open ones go on.
  void stop_accepting();
  // Number of connections open now.
  size_t num_connections() const;
  // Request-body bytes held now (HttpServerConfig::max_inflight_body_bytes).
  size_t body_bytes_in_flight() const;
  // Stops every connection and joins the I/O threads.
  void stop();

  class Impl;

 private:
  explicit HttpServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace m2::server
