#include "server/metrics.h"

#include <fmt/format.h>

namespace m2::server {

void Histogram::observe(double v, uint64_t times) {
  size_t i = 0;
  while (i < bounds_.size() && v > bounds_[i]) ++i;
  counts_[i] += times;
  sum_ += v * static_cast<double>(times);
  count_ += times;
}

void Histogram::render(const std::string& name, const std::string& help, std::string* out,
                       const std::string& labels) const {
  *out += fmt::format("# HELP {} {}\n# TYPE {} histogram\n", name, help, name);
  const std::string pre = labels.empty() ? "" : labels + ",";
  const std::string own = labels.empty() ? "" : "{" + labels + "}";
  uint64_t cumulative = 0;
  for (size_t i = 0; i < bounds_.size(); ++i) {
    cumulative += counts_[i];
    *out += fmt::format("{}_bucket{{{}le=\"{}\"}} {}\n", name, pre, bounds_[i], cumulative);
  }
  *out += fmt::format("{}_bucket{{{}le=\"+Inf\"}} {}\n{}_sum{} {}\n{}_count{} {}\n", name, pre, count_, name, own, sum_,
                      name, own, count_);
}

namespace {

constexpr const char* kFinishReasons[] = {"stop", "length", "abort", "error"};

// vLLM's token-count buckets (1, 2, 5 per decade) up to 200K, past M2's context.
std::vector<double> token_buckets() {
  std::vector<double> b;
  for (double d = 1; d <= 100000; d *= 10)
    for (double m : {1.0, 2.0, 5.0}) b.push_back(d * m);
  return b;
}

// A Prometheus label value: backslash, quote and newline escaped.
std::string label_value(std::string_view v) {
  std::string out;
  for (char c : v) {
    if (c == '\\' || c == '"') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out;
}

}  // namespace

// vLLM's bucket bounds.
Metrics::Metrics()
    : ttft_({0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0,
             40.0, 80.0, 160.0, 640.0, 2560.0}),
      tpot_({0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0,
             80.0}),
      e2e_({0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0,
            960.0, 1920.0, 7680.0}),
      itl_({0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0}),
      request_prompt_(token_buckets()),
      request_generation_(token_buckets()) {}

void Metrics::set_model_name(std::string name) {
  std::lock_guard<std::mutex> lock(mu_);
  model_label_ = "model_name=\"" + label_value(name) + "\"";
}

void Metrics::observe_inter_token(double gap, int64_t tokens) {
  if (tokens < 1) return;
  std::lock_guard<std::mutex> lock(mu_);
  itl_.observe(gap / static_cast<double>(tokens), static_cast<uint64_t>(tokens));
}

void Metrics::count_finished(std::string_view reason) {
  size_t i = 0;
  while (i < 3 && reason != kFinishReasons[i]) ++i;
  std::lock_guard<std::mutex> lock(mu_);
  ++finished_[i];
}

const char* route_label(std::string_view path) {
  static constexpr const char* kRoutes[] = {"/v1/chat/completions", "/v1/completions", "/v1/messages",
                                            "/v1/messages/count_tokens", "/v1/responses",
                                            "/v1/health/live", "/v1/health/ready", "/v1/metadata", "/v1/version",
                                            "/v1/metrics", "/v1/models", "/tokenize", "/detokenize",
                                            "/health", "/metrics", "/version"};
  for (const char* route : kRoutes)
    if (path == route) return route;
  if (path.rfind("/v1/models/", 0) == 0) return "/v1/models/{model}";
  if (path.rfind("/v1/responses/", 0) == 0) return "/v1/responses/{id}";
  return "other";
}

void Metrics::count_request(std::string_view path, int status) {
  std::lock_guard<std::mutex> lock(mu_);
  ++requests_[{route_label(path), status}];
}

void Metrics::count_tokens(int64_t prompt, int64_t generated) {
  std::lock_guard<std::mutex> lock(mu_);
  prompt_tokens_ += prompt;
  generation_tokens_ += generated;
}

void Metrics::observe_request(double ttft, double tpot, double e2e, int64_t prompt_tokens,
                              int64_t generation_tokens) {
  std::lock_guard<std::mutex> lock(mu_);
  if (ttft >= 0) ttft_.observe(ttft);
  if (tpot >= 0) tpot_.observe(tpot);
  e2e_.observe(e2e);
  request_prompt_.observe(static_cast<double>(prompt_tokens));
  request_generation_.observe(static_cast<double>(generation_tokens));
}

std::string Metrics::render(const EngineLoopStats& s) const {
  std::lock_guard<std::mutex> lock(mu_);
  std::string out;
  auto gauge = [&](const char* name, const char* help, double v) {
    out += fmt::format("# HELP {} {}\n# TYPE {} gauge\n{} {}\n", name, help, name, name, v);
  };
  auto counter = [&](const char* name, const char* help, double v) {
    out += fmt::format("# HELP {} {}\n# TYPE {} counter\n{} {}\n", name, help, name, name, v);
  };
  out += "# HELP m2cpp:http_requests_total HTTP requests by route and status.\n"
         "# TYPE m2cpp:http_requests_total counter\n";
  for (const auto& [key, n] : requests_)
    out += fmt::format("m2cpp:http_requests_total{{route=\"{}\",status=\"{}\"}} {}\n", key.first, key.second, n);
  counter("m2cpp:prompt_tokens_total", "Prompt tokens computed (counted at a request's first output).",
          static_cast<double>(prompt_tokens_));
  counter("m2cpp:generation_tokens_total",
          "Generated tokens, counted as produced (running and cancelled requests included).",
          static_cast<double>(generation_tokens_));
  ttft_.render("m2cpp:time_to_first_token_seconds", "Time from request arrival to its first token.", &out);
  tpot_.render("m2cpp:time_per_output_token_seconds", "Mean time between output tokens of a request.", &out);
  e2e_.render("m2cpp:e2e_request_latency_seconds", "Time from request arrival to its last output.", &out);
  const EngineStats& e = s.engine;
  gauge("m2cpp:num_requests_running", "Sequences being generated.", static_cast<double>(e.running));
  gauge("m2cpp:num_requests_paused", "Sequences not scheduled because their client is not reading (backpressure).",
        static_cast<double>(e.paused));
  gauge("m2cpp:num_requests_waiting", "Sequences waiting for a slot, and requests queued for the engine.",
        static_cast<double>(e.waiting + s.queued));
  gauge("m2cpp:kv_cache_blocks_used", "KV-cache blocks in use.", static_cast<double>(e.kv_blocks_used));
  gauge("m2cpp:kv_cache_blocks_total", "KV-cache blocks in the pool.", static_cast<double>(e.kv_blocks_total));
  gauge("m2cpp:kv_cache_usage_perc", "Fraction of KV-cache blocks in use.",
        e.kv_blocks_total ? static_cast<double>(e.kv_blocks_used) / static_cast<double>(e.kv_blocks_total) : 0.0);
  counter("m2cpp:prefix_cache_queries_total", "Prompt tokens looked up in the prefix cache.",
          static_cast<double>(e.prefix.queried_tokens));
  counter("m2cpp:prefix_cache_hits_total", "Prompt tokens found in the prefix cache.",
          static_cast<double>(e.prefix.hit_tokens));
  counter("m2cpp:num_preemptions_total", "Sequences preempted (recomputed later) for lack of KV blocks.",
          static_cast<double>(e.preemptions));

  // vLLM's names, for dashboards made for it.
  const std::string& m = model_label_;
  auto vllm = [&](const char* type, const char* name, const char* help, double v) {
    out += fmt::format("# HELP {} {}\n# TYPE {} {}\n{}{{{}}} {}\n", name, help, name, type, name, m, v);
  };
  vllm("gauge", "vllm:num_requests_running", "Requests running on the engine.", static_cast<double>(e.running));
  vllm("gauge", "vllm:num_requests_waiting", "Requests waiting to be scheduled.",
       static_cast<double>(e.waiting + s.queued));
  vllm("gauge", "vllm:kv_cache_usage_perc", "KV-cache usage (1 = full).",
       e.kv_blocks_total ? static_cast<double>(e.kv_blocks_used) / static_cast<double>(e.kv_blocks_total) : 0.0);
  vllm("counter", "vllm:prompt_tokens_total", "Prefill tokens processed.", static_cast<double>(prompt_tokens_));
  vllm("counter", "vllm:generation_tokens_total", "Generation tokens processed.",
       static_cast<double>(generation_tokens_));
  vllm("counter", "vllm:num_preemptions_total", "Preemptions.", static_cast<double>(e.preemptions));
  vllm("counter", "vllm:prefix_cache_queries_total", "Prefix-cache queries, in tokens.",
       static_cast<double>(e.prefix.queried_tokens));
  vllm("counter", "vllm:prefix_cache_hits_total", "Prefix-cache hits, in tokens.",
       static_cast<double>(e.prefix.hit_tokens));
  out += "# HELP vllm:request_success_total Finished requests by finish reason.\n"
         "# TYPE vllm:request_success_total counter\n";
  for (size_t i = 0; i < 4; ++i)
    out += fmt::format("vllm:request_success_total{{{},finished_reason=\"{}\"}} {}\n", m, kFinishReasons[i],
                       finished_[i]);
  ttft_.render("vllm:time_to_first_token_seconds", "Time to first token in seconds.", &out, m);
  tpot_.render("vllm:time_per_output_token_seconds", "Time per output token in seconds.", &out, m);
  itl_.render("vllm:inter_token_latency_seconds", "Inter-token latency in seconds.", &out, m);
  e2e_.render("vllm:e2e_request_latency_seconds", "End-to-end request latency in seconds.", &out, m);
  request_prompt_.render("vllm:request_prompt_tokens", "Prefill tokens per request.", &out, m);
  request_generation_.render("vllm:request_generation_tokens", "Generation tokens per request.", &out, m);
  return out;
}

}  // namespace m2::server
