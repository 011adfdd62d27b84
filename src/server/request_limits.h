// Server-wide limits on what clients may make the server hold or do, shared
// by every connection (so thread-safe), and kept apart from the sockets so
// that each is tested without one:
//  - BodyBudget: request-body bytes in flight (being received, waiting for a
//    request thread, being parsed) across all connections; a body that does
//    not fit gets 503 + Retry-After before it is read (Content-Length), or
//    as soon as it outgrows the budget (chunked). Without it the bound is
//    per connection, times the connection cap: 1024 x 32 MiB.
//  - ClientRateLimiter: requests per second per client address (a token
//    bucket each); past it 429 + Retry-After. Its table of clients is capped,
//    so a flood of source addresses cannot grow it without bound.
//  - RateLimitedLog: at most a line a second for events that can repeat
//    thousands of times a second.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>
#include <unordered_map>

namespace m2::server {

class BodyBudget {
 public:
  explicit BodyBudget(size_t limit) : limit_(limit) {}
  // Adds `bytes` if the total stays within the limit.
  bool try_add(size_t bytes);
  void release(size_t bytes) { used_.fetch_sub(bytes); }
  size_t in_flight() const { return used_.load(); }
  size_t limit() const { return limit_; }

 private:
  const size_t limit_;
  std::atomic<size_t> used_{0};
};

// The bytes of one request body charged to the budget, given back when the
// body is freed (the reservation lives with the HttpRequest that owns it).
class BodyReservation {
 public:
  explicit BodyReservation(BodyBudget& budget) : budget_(budget) {}
  ~BodyReservation() { budget_.release(held_); }
  BodyReservation(const BodyReservation&) = delete;
  BodyReservation& operator=(const BodyReservation&) = delete;
  // Holds `total` bytes (never fewer than now); false, holding what it held,
  // if the budget cannot give the difference.
  bool grow_to(size_t total);
  size_t held() const { return held_; }

 private:
  BodyBudget& budget_;
  size_t held_ = 0;
};

class ClientRateLimiter {
 public:
  using Clock = std::chrono::steady_clock;
  // `rate` requests a second per client, bursts of up to `burst`.
  // `max_clients`: clients tracked at once; past it idle ones are forgotten
  // (a full bucket carries no state), then the longest unseen.
  ClientRateLimiter(double rate, double burst, size_t max_clients = 65536);
  // 0 when `client` may send a request now (its token is taken), else the
  // seconds until it may.
  double admit(const std::string& client, Clock::time_point now = Clock::now());
  size_t clients() const;
  double rate() const { return rate_; }

 private:
  struct Bucket {
    double tokens;
    Clock::time_point last;
  };
  void evict(Clock::time_point now);

  const double rate_, burst_;
  const size_t max_clients_;
  mutable std::mutex mu_;
  std::unordered_map<std::string, Bucket> buckets_;
};

class RateLimitedLog {
 public:
  // True when a line may be written now; else the event is counted.
  bool due();
  // " (N more since the last line)" for the events due() refused, or "".
  std::string suppressed_note() const;

 private:
  mutable std::mutex mu_;
  std::chrono::steady_clock::time_point last_{};
  uint64_t suppressed_ = 0, reported_ = 0;
};

}  // namespace m2::server
