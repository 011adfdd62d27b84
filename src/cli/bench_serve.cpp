// The options of `m2cpp bench serve`, spelled as `vllm bench serve` spells
// them where there is an equivalent; the benchmark itself is
// loadgen/serve_bench.h.
#include "cli/bench_serve.h"

#include <csignal>
#include <cstdlib>

#include "loadgen/serve_bench.h"
#include "util/log.h"

namespace m2::cli {
namespace {

struct Args {
  loadgen::ServeBenchConfig config;
  std::string endpoint = "completions";
  std::vector<std::string> rates;
  std::string extra_body;
  bool no_ignore_eos = false;
  bool no_progress = false;
};

Status finish_config(Args& a, bool output_len_set) {
  loadgen::ServeBenchConfig& c = a.config;
  if (a.endpoint == "completions" || a.endpoint == "/v1/completions") {
    c.request.endpoint = loadgen::Endpoint::kCompletions;
  } else if (a.endpoint == "chat" || a.endpoint == "/v1/chat/completions") {
    c.request.endpoint = loadgen::Endpoint::kChat;
  } else {
    return errorf("--endpoint: completions or chat, not '{}'", a.endpoint);
  }
  c.workload.endpoint = c.request.endpoint;
  c.workload.kind = c.dataset == "sharegpt" ? loadgen::DatasetKind::kShareGpt
                    : c.dataset == "agentic" ? loadgen::DatasetKind::kAgentic
                                             : loadgen::DatasetKind::kRandom;
  c.workload.output_len_set = output_len_set;
  if (c.workload.kind == loadgen::DatasetKind::kAgentic && c.workload.shared_prefix_len < 0)
    c.workload.shared_prefix_len = c.workload.input_len / 2;
  c.workload.shared_prefix_len = std::max<int64_t>(c.workload.shared_prefix_len, 0);
  for (const std::string& r : a.rates) {
    if (r == "inf") {
      c.request_rates.push_back(0);
      continue;
    }
    char* end = nullptr;
    const double v = std::strtod(r.c_str(), &end);
    if (end == r.c_str() || *end != '\0' || !(v > 0)) return errorf("--request-rate: '{}' is not a rate > 0 or inf", r);
    c.request_rates.push_back(v);
  }
  for (int n : c.concurrency)
    if (n < 1) return errorf("--concurrency: levels must be >= 1");
  if (!a.extra_body.empty()) {
    M2_ASSIGN_OR_RETURN(c.request.extra_body, parse_json(a.extra_body, "--extra-body"));
    if (!c.request.extra_body.is_object()) return errorf("--extra-body must be a JSON object");
  }
  c.request.ignore_eos = !a.no_ignore_eos;
  c.progress = !a.no_progress;
  if (c.api_key.empty())
    if (const char* key = std::getenv("OPENAI_API_KEY")) c.api_key = key;
  return Status();
}

}  // namespace

std::function<int()> add_bench_serve(CLI::App* bench, CLI::App** sub) {
  auto* app = bench->add_subcommand(
      "serve", "Benchmark an OpenAI-compatible server (m2cpp, vLLM, SGLang) over concurrency levels: TTFT, TPOT, "
               "ITL, throughput, and the throughput-interactivity Pareto plot");
  auto a = std::make_shared<Args>();
  loadgen::ServeBenchConfig& c = a->config;
  c.workload.shared_prefix_len = -1;  // unset: 0, or half the input for agentic
  app->add_option("--base-url", c.base_url, "Server address")->capture_default_str();
  app->add_option("--model", c.model, "Model name to request (default: the first of GET /v1/models)");
  app->add_option("--api-key", c.api_key, "Bearer key (default: $OPENAI_API_KEY)");
  app->add_option("--endpoint", a->endpoint,
                  "completions (/v1/completions, token-id prompts) or chat (/v1/chat/completions, text prompts)")
      ->capture_default_str();
  app->add_option("--dataset,--dataset-name", c.dataset,
                  "random: fixed lengths; sharegpt: a ShareGPT JSON (--dataset-path); agentic: multi-turn "
                  "sessions growing by tool results")
      ->check(CLI::IsMember({"random", "sharegpt", "agentic"}))
      ->capture_default_str();
  app->add_option("--dataset-path", c.workload.dataset_path, "ShareGPT-format JSON file (--dataset sharegpt)");
  app->add_option("--input-len,--random-input-len", c.workload.input_len, "Prompt tokens (agentic: first turn)")
      ->capture_default_str();
  auto* out_len = app->add_option("--output-len,--random-output-len", c.workload.output_len,
                                   "Output tokens per request (sharegpt: overrides the reference answers)")
                      ->capture_default_str();
  app->add_option("--shared-prefix-len", c.workload.shared_prefix_len,
                  "Prompt tokens common to every session (default 0; agentic: half of --input-len)");
  app->add_option("--turns", c.workload.turns, "Agentic: turns per session")->capture_default_str();
  app->add_option("--tool-result-len", c.workload.tool_len, "Agentic: tokens of each tool result")
      ->capture_default_str();
  app->add_option("--concurrency", c.concurrency, "Levels of requests in flight, e.g. 1,4,16,64,256")
      ->delimiter(',')
      ->capture_default_str();
  app->add_option("--request-rate", a->rates,
                  "Instead of --concurrency: levels of Poisson arrivals per second (or inf), e.g. 1,2,4")
      ->delimiter(',');
  app->add_option("--max-concurrency", c.max_concurrency, "With --request-rate: requests in flight at most");
  app->add_option("--num-prompts", c.num_prompts,
                  "Requests (agentic: sessions) per level (default --prompts-per-concurrency x concurrency; 200 per rate)");
  app->add_option("--prompts-per-concurrency", c.prompts_per_concurrency,
                  "Without --num-prompts: requests per level = this x the level's concurrency")
      ->capture_default_str();
  app->add_option("--warmup,--num-warmups", c.warmup, "Requests run first and not measured");
  app->add_option("--gpus", c.gpus, "GPUs serving the model: throughput is also reported per GPU")
      ->capture_default_str();
  app->add_option("--tokenizer", c.tokenizer_dir,
                  "Directory with tokenizer.json, for servers without /tokenize and /detokenize");
  app->add_option("--label", c.label, "Name of this run in plots (default: model @ host:port)");
  app->add_option("--out", c.out_prefix, "Write PREFIX.json, PREFIX.svg (and PREFIX.png) (default: bench-serve-DATE)");
  app->add_option("--seed", c.seed, "Random seed of the prompts and arrivals (default: from the clock, printed)");
  app->add_option("--temperature", c.request.temperature, "Sampling temperature")->capture_default_str();
  app->add_option("--extra-body", a->extra_body, "JSON object merged into every request body");
  app->add_flag("--no-ignore-eos", a->no_ignore_eos, "Do not send ignore_eos (output lengths then vary)");
  app->add_flag("--no-progress", a->no_progress, "No progress bar on stderr");
  *sub = app;
  return [a, out_len] {
    std::signal(SIGPIPE, SIG_IGN);
    if (Status s = finish_config(*a, out_len->count() > 0); !s.ok()) return log_error("{}", s.message()), 2;
    auto outcome = loadgen::run_serve_bench(a->config);
    if (!outcome.ok()) return log_error("bench serve: {}", outcome.status().message()), 1;
    return outcome->interrupted ? 130 : 0;
  };
}

}  // namespace m2::cli
