// `m2cpp bench serve`: the serving benchmark of any OpenAI-compatible
// server (m2cpp serve, vLLM, SGLang), as `vllm bench serve` measures it, over
// a sweep of concurrency levels (or request rates): warm-up, one level after
// the other, a table on stdout, every raw sample in a JSON file, and the
// throughput-interactivity Pareto plot. Ctrl-C stops the run and still
// reports and writes what was measured.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "loadgen/openai_request.h"
#include "loadgen/workload.h"
#include "util/json.h"

namespace m2::loadgen {

struct ServeBenchConfig {
  std::string base_url = "http://127.0.0.1:8000";
  std::string model;          // "" : the first model of GET /v1/models
  std::string api_key;
  std::string dataset = "random";  // random, sharegpt, agentic (as written in the results)
  WorkloadConfig workload;
  RequestOptions request;     // model filled in by the run
  std::vector<int> concurrency = {1, 4, 16, 64, 256};
  std::vector<double> request_rates;  // when given: one level per rate, at most max_concurrency in flight
  int max_concurrency = 0;
  int num_prompts = 0;        // sessions per level (0: prompts_per_concurrency x concurrency, or 200 per rate)
  int prompts_per_concurrency = 10;
  int warmup = 0;             // sessions run first and not measured
  int gpus = 1;
  std::string tokenizer_dir;  // "" : the server's /tokenize and /detokenize
  std::string label;          // the run's name in plots ("" : "model @ host:port")
  std::string out_prefix;     // PREFIX.json, PREFIX.svg, PREFIX.png
  uint64_t seed = 0;          // 0: from the clock (prompts a previous run left in the prefix cache would hit)
  bool progress = true;
};

struct ServeBenchOutcome {
  bool interrupted = false;
  std::string json_path, svg_path, png_path;
};

Result<ServeBenchOutcome> run_serve_bench(ServeBenchConfig config);

}  // namespace m2::loadgen
