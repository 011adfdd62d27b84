// The server-wide request limits (server/request_limits.h): the budget of
// request-body bytes in flight and the per-client rate limit, alone and on a
// loopback HttpServer (503 / 429 with Retry-After before the body is read,
// a log line, the budget given back when the request is destroyed, /health
// exempt from the rate limit).
#include "server/request_limits.h"

#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "server/http_server.h"
#include "socket_client.h"

namespace m2::server {
namespace {

using namespace std::chrono_literals;

TEST(BodyBudget, ReservationsGrowWithinTheLimitAndAreGivenBack) {
  BodyBudget budget(100);
  {
    BodyReservation a(budget), b(budget);
    EXPECT_TRUE(a.grow_to(60));
    EXPECT_TRUE(a.grow_to(40));  // never shrinks
    EXPECT_EQ(a.held(), 60u);
    EXPECT_FALSE(b.grow_to(41));
    EXPECT_EQ(b.held(), 0u);  // a refused growth holds what it held
    EXPECT_TRUE(b.grow_to(40));
    EXPECT_EQ(budget.in_flight(), 100u);
    EXPECT_FALSE(b.grow_to(41));
  }
  EXPECT_EQ(budget.in_flight(), 0u);
  BodyReservation huge(budget);
  EXPECT_FALSE(huge.grow_to(SIZE_MAX));  // no wrap-around
  EXPECT_EQ(budget.in_flight(), 0u);
}

TEST(ClientRateLimiter, TokenBucketPerClient) {
  using Clock = ClientRateLimiter::Clock;
  ClientRateLimiter limiter(2.0, 3.0);  // 2/s, bursts of 3
  const Clock::time_point t0 = Clock::now();
  for (int i = 0; i < 3; ++i) EXPECT_EQ(limiter.admit("a", t0), 0.0) << i;
  const double wait = limiter.admit("a", t0);
  EXPECT_NEAR(wait, 0.5, 1e-9);                          // one token at 2/s
  EXPECT_EQ(limiter.admit("b", t0), 0.0);                // another client has its own bucket
  EXPECT_GT(limiter.admit("a", t0 + 400ms), 0.0);
  EXPECT_EQ(limiter.admit("a", t0 + 500ms), 0.0);
  EXPECT_EQ(limiter.admit("a", t0 + 10s), 0.0);          // refilled to the burst, not beyond
  EXPECT_EQ(limiter.admit("a", t0 + 10s), 0.0);
  EXPECT_EQ(limiter.admit("a", t0 + 10s), 0.0);
  EXPECT_GT(limiter.admit("a", t0 + 10s), 0.0);
}

TEST(ClientRateLimiter, ItsTableOfClientsIsBounded) {
  using Clock = ClientRateLimiter::Clock;
  ClientRateLimiter limiter(1.0, 1.0, 64);
  const Clock::time_point t0 = Clock::now();
  // A flood of addresses, all active: the table stays at its cap.
  for (int i = 0; i < 10000; ++i) limiter.admit("10.0." + std::to_string(i), t0 + std::chrono::microseconds(i));
  EXPECT_LE(limiter.clients(), 64u);
  // The latest clients are still limited (their buckets were kept).
  EXPECT_GT(limiter.admit("10.0.9999", t0 + 10ms), 0.0);
  // Idle clients (full buckets) are forgotten first.
  limiter.admit("fresh", t0 + 1h);
  EXPECT_LE(limiter.clients(), 64u);
}

// An HttpServer that keeps every request (and so its body) until release().
class HeldRequests {
 public:
  HttpHandler handler() {
    return [this](HttpRequest&& r, std::shared_ptr<ResponseWriter> w) {
      if (r.path != "/hold") {
        HttpResponse ok;
        ok.body = r.body_too_large ? "413" : "ok";
        if (r.body_too_large) ok.status = 413;
        return w->respond(std::move(ok));
      }
      std::lock_guard<std::mutex> lock(mu_);
      held_.push_back({std::move(r), std::move(w)});
      cv_.notify_all();
    };
  }
  bool wait_for(size_t n) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, 10s, [&] { return held_.size() >= n; });
  }
  void release() {
    std::vector<std::pair<HttpRequest, std::shared_ptr<ResponseWriter>>> held;
    {
      std::lock_guard<std::mutex> lock(mu_);
      held.swap(held_);
    }
    for (auto& [r, w] : held) {
      HttpResponse ok;
      ok.body = std::to_string(r.body.size());
      w->respond(std::move(ok));
    }
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::pair<HttpRequest, std::shared_ptr<ResponseWriter>>> held_;
};

std::string post_to(int port, const std::string& path, size_t bytes) {
  return testing::post(port, path, std::string(bytes, 'x'));
}

TEST(HttpServer, BodiesInFlightPastTheBudgetGet503) {
  HeldRequests held;
  HttpServerConfig config;
  config.port = 0;
  config.max_body_bytes = 800;
  config.max_inflight_body_bytes = 1000;
  auto server = HttpServer::create(config, held.handler());
  ASSERT_TRUE(server.ok());
  (*server)->start();
  const int port = (*server)->port();
  ::testing::internal::CaptureStderr();
  std::string first;
  std::thread t([&] { first = post_to(port, "/hold", 600); });
  ASSERT_TRUE(held.wait_for(1));
  // 600 held + 600 > 1000: refused before the body is read.
  EXPECT_EQ((*server)->body_bytes_in_flight(), 600u);
  const std::string refused = post_to(port, "/other", 600);
  EXPECT_EQ(refused.rfind("HTTP/1.1 503", 0), 0u) << refused;
  EXPECT_NE(refused.find("Retry-After: 1"), std::string::npos) << refused;
  // A chunked body is charged as it grows: refused once it passes what is left.
  std::string chunked =
      "POST /other HTTP/1.1\r\nHost: x\r\nConnection: close\r\nTransfer-Encoding: chunked\r\n\r\n";
  for (int i = 0; i < 6; ++i) chunked += "64\r\n" + std::string(100, 'y') + "\r\n";
  chunked += "0\r\n\r\n";
  const std::string refused_chunked = testing::roundtrip(port, chunked);
  EXPECT_EQ(refused_chunked.rfind("HTTP/1.1 503", 0), 0u) << refused_chunked;
  EXPECT_EQ(post_to(port, "/other", 300).rfind("HTTP/1.1 200", 0), 0u);  // what fits is served
  // A request's bytes are given back when the server destroys it, which may
  // be just after its client has read the answer.
  auto drained = [&] {
    for (int i = 0; i < 1000 && (*server)->body_bytes_in_flight() > 600; ++i) std::this_thread::sleep_for(1ms);
    return (*server)->body_bytes_in_flight();
  };
  EXPECT_EQ(drained(), 600u);  // the held body only
  held.release();              // given back with its request
  t.join();
  EXPECT_NE(first.find("\r\n\r\n600"), std::string::npos) << first;
  for (int i = 0; i < 1000 && (*server)->body_bytes_in_flight() > 0; ++i) std::this_thread::sleep_for(1ms);
  EXPECT_EQ((*server)->body_bytes_in_flight(), 0u);
  EXPECT_EQ(post_to(port, "/other", 800).rfind("HTTP/1.1 200", 0), 0u);
  for (int i = 0; i < 1000 && (*server)->body_bytes_in_flight() > 0; ++i) std::this_thread::sleep_for(1ms);
  EXPECT_EQ(testing::roundtrip(port, chunked).rfind("HTTP/1.1 200", 0), 0u);
  const std::string log = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(log.find("request bodies in flight at the limit"), std::string::npos) << log;
  EXPECT_NE(log.find("--max-inflight-body-bytes 1000"), std::string::npos) << log;
  (*server)->stop();
}

TEST(HttpServer, ClientsOverTheRateGet429AndHealthIsExempt) {
  HeldRequests held;
  HttpServerConfig config;
  config.port = 0;
  config.rate_limit = 0.5;  // a request every 2 s
  config.rate_limit_burst = 2;
  auto server = HttpServer::create(config, held.handler());
  ASSERT_TRUE(server.ok());
  (*server)->start();
  const int port = (*server)->port();
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(testing::get(port, "/v1/models").rfind("HTTP/1.1 200", 0), 0u);
  EXPECT_EQ(post_to(port, "/v1/x", 10).rfind("HTTP/1.1 200", 0), 0u);
  const std::string limited = post_to(port, "/v1/x", 10);
  EXPECT_EQ(limited.rfind("HTTP/1.1 429", 0), 0u) << limited;
  EXPECT_NE(limited.find("Retry-After: 2"), std::string::npos) << limited;
  for (int i = 0; i < 20; ++i) EXPECT_EQ(testing::get(port, "/health").rfind("HTTP/1.1 200", 0), 0u);
  const std::string log = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(log.find("over --rate-limit 0.5 requests/s"), std::string::npos) << log;
  (*server)->stop();
}

}  // namespace
}  // namespace m2::server
