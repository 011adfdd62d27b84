// Server metrics in the Prometheus text format (GET /metrics, /v1/metrics),
// named as vLLM's with an `m2cpp:` prefix: requests by route and status,
// prompt and generated tokens, time to first token / per output token / end
// to end histograms, and the engine's running and waiting requests, KV
// blocks and prefix-cache counters. The same series are also written under
// vLLM's own names (`vllm:...{model_name="..."}`, with vLLM's
// request_success_total{finished_reason}, inter-token latency and
// per-request token-count histograms) so that dashboards built for vLLM
// work unchanged. Every label value comes from a fixed set or the server's
// flags (the model name), never from a request.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "engine/engine_loop.h"

namespace m2::server {

class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds) : bounds_(std::move(bounds)), counts_(bounds_.size() + 1) {}
  void observe(double v, uint64_t times = 1);
  // `labels`: `k="v",...` put in every sample ("" for none).
  void render(const std::string& name, const std::string& help, std::string* out,
              const std::string& labels = "") const;

 private:
  std::vector<double> bounds_;
  std::vector<uint64_t> counts_;  // per bucket (not cumulative); last: +Inf
  double sum_ = 0;
  uint64_t count_ = 0;
};

// The `route` label of a request path: one of the served routes
// ("/v1/models/{model}" for every model card), or "other" for anything else,
// so that no client can add label values (and memory) by inventing paths.
const char* route_label(std::string_view path);

// Thread-safe.
class Metrics {
 public:
  Metrics();
  // `path` as requested; counted under route_label(path).
  void count_request(std::string_view path, int status);
  void count_tokens(int64_t prompt, int64_t generated);
  // One finished generation request: its latencies in seconds (ttft < 0: no token) and token counts.
  void observe_request(double ttft, double tpot, double e2e, int64_t prompt_tokens, int64_t generation_tokens);
  // `tokens` output tokens that arrived `gap` seconds after the request's previous ones (each gets gap / tokens).
  void observe_inter_token(double gap, int64_t tokens);
  // One completion ended: "stop", "length", "abort" or "error" (anything else counts as "error").
  void count_finished(std::string_view reason);
  // The `model_name` label of the vllm: series (the reported served name).
  void set_model_name(std::string name);
  std::string render(const EngineLoopStats& stats) const;

 private:
  mutable std::mutex mu_;
  std::map<std::pair<std::string_view, int>, uint64_t> requests_;  // keys: route_label()'s literals
  int64_t prompt_tokens_ = 0, generation_tokens_ = 0;
  Histogram ttft_, tpot_, e2e_, itl_, request_prompt_, request_generation_;
  uint64_t finished_[4] = {};  // stop, length, abort, error
  std::string model_label_ = "model_name=\"\"";
};

}  // namespace m2::server
