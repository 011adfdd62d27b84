// Server metrics in the Prometheus text format (GET /metrics), named as
// vLLM's with an `m2cpp:` prefix so that existing dashboards map one to one:
// requests by route and status, prompt and generated tokens, time to first
// token / per output token / end to end histograms, and the engine's
// running and waiting requests, KV blocks and prefix-cache counters.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "engine/engine_loop.h"

namespace m2::server {

class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds) : bounds_(std::move(bounds)), counts_(bounds_.size() + 1) {}
  void observe(double v);
  void render(const std::string& name, const std::string& help, std::string* out) const;

 private:
  std::vector<double> bounds_;
  std::vector<uint64_t> counts_;  // per bucket (not cumulative); last: +Inf
  double sum_ = 0;
  uint64_t count_ = 0;
};

// Thread-safe.
class Metrics {
 public:
  Metrics();
  void count_request(const std::string& route, int status);
  void count_tokens(int64_t prompt, int64_t generated);
  // One finished generation request: its latencies in seconds (ttft < 0: no token).
  void observe_request(double ttft, double tpot, double e2e);
  std::string render(const EngineLoopStats& stats) const;

 private:
  mutable std::mutex mu_;
  std::map<std::pair<std::string, int>, uint64_t> requests_;
  int64_t prompt_tokens_ = 0, generation_tokens_ = 0;
  Histogram ttft_, tpot_, e2e_;
};

}  // namespace m2::server
