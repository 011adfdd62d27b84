// One connection of the HttpServer, on its own strand: requests read with
// their framing checked (http_framing.h), handed to the handler one at a
// time, responses written whole or streamed (chunked; raw to HTTP/1.0
// clients), keep-alive, a disconnect watch while a response is produced,
// a capped output buffer with backpressure and a stall timeout, and a
// lingering close. Internal to the server layer.
#pragma once

#include <boost/asio/ip/tcp.hpp>

#include <atomic>
#include <cstddef>

#include "server/http_server.h"
#include "server/request_limits.h"

namespace m2::server {

// What a session needs of its server, which outlives every session (it
// joins its I/O threads before it goes).
struct SessionContext {
  const HttpServerConfig& config;
  const HttpHandler& handler;
  std::atomic<size_t>& connections;  // sessions alive: each counts itself in and out
  BodyBudget& bodies;                // request-body bytes in flight, all connections
  ClientRateLimiter* rate_limiter;   // null: no per-client limit
  RateLimitedLog& budget_log;        // "bodies in flight at the limit" lines
  RateLimitedLog& rate_log;          // "client over its rate" lines
};

// Serves an accepted socket; the session keeps itself alive until it closes.
void start_session(boost::asio::ip::tcp::socket socket, SessionContext& context);

}  // namespace m2::server
