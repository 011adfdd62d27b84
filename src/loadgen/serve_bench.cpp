#include "loadgen/serve_bench.h"

#include <csignal>
#include <ctime>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <fstream>

#include "loadgen/level_runner.h"
#include "loadgen/level_summary.h"
#include "loadgen/pareto_plot.h"
#include "loadgen/report_table.h"
#include "loadgen/token_source.h"
#include "util/log.h"
#include "util/progress_bar.h"

namespace m2::loadgen {
namespace {

std::atomic<bool> g_stop{false};
static_assert(std::atomic<bool>::is_always_lock_free, "set from a signal handler");

void on_sigint(int) { g_stop.store(true); }

// SIGINT sets the stop flag while it lives; a second Ctrl-C kills the
// process (SA_RESETHAND restores the default action after the first).
class SigintGuard {
 public:
  SigintGuard() {
    g_stop.store(false);
    struct sigaction sa = {};
    sa.sa_handler = on_sigint;
    sa.sa_flags = SA_RESETHAND;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &old_);
  }
  ~SigintGuard() { sigaction(SIGINT, &old_, nullptr); }

 private:
  struct sigaction old_ = {};
};

std::string utc_now(const char* format) {
  const std::time_t t = std::time(nullptr);
  std::tm tm = {};
  gmtime_r(&t, &tm);
  char buf[64];
  std::strftime(buf, sizeof(buf), format, &tm);
  return buf;
}

Result<std::string> first_model(HttpClient& client) {
  M2_ASSIGN_OR_RETURN(HttpReply reply, client.get("/v1/models"));
  if (reply.status != 200) return errorf("GET /v1/models: HTTP {} (give --model)", reply.status);
  M2_ASSIGN_OR_RETURN(Json j, parse_json(reply.body, "/v1/models"));
  if (!j.contains("data") || !j["data"].is_array() || j["data"].empty() || !j["data"][0].contains("id"))
    return errorf("GET /v1/models lists no model (give --model)");
  return j["data"][0]["id"].get<std::string>();
}

std::vector<LevelSpec> level_specs(const ServeBenchConfig& c) {
  std::vector<LevelSpec> levels;
  for (double r : c.request_rates)
    levels.push_back({c.max_concurrency, r, r > 0 ? fmt::format("rate={:g}", r) : std::string("rate=inf")});
  if (levels.empty())
    for (int n : c.concurrency) levels.push_back({n, 0.0, fmt::format("c={}", n)});
  return levels;
}

int sessions_for(const ServeBenchConfig& c, const LevelSpec& l) {
  if (c.num_prompts > 0) return c.num_prompts;
  return l.request_rate > 0 || l.concurrency <= 0 ? 200
                                                  : std::max(c.prompts_per_concurrency * l.concurrency, 1);
}

Json config_json(const ServeBenchConfig& c) {
  const WorkloadConfig& w = c.workload;
  Json rates = c.request_rates.empty() ? Json(nullptr) : Json::array();
  for (double r : c.request_rates) rates.push_back(r > 0 ? Json(r) : Json(nullptr));  // null: inf
  Json j = {{"base_url", c.base_url},
            {"model", c.request.model},
            {"endpoint", endpoint_path(c.request.endpoint)},
            {"dataset", c.dataset},
            {"input_len", w.kind == DatasetKind::kShareGpt ? Json(nullptr) : Json(w.input_len)},
            {"output_len", w.kind == DatasetKind::kShareGpt && !w.output_len_set ? Json(nullptr) : Json(w.output_len)},
            {"shared_prefix_len", w.shared_prefix_len},
            {"concurrency", c.request_rates.empty() ? Json(c.concurrency) : Json(nullptr)},
            {"request_rates", rates},
            {"max_concurrency", c.max_concurrency > 0 ? Json(c.max_concurrency) : Json(nullptr)},
            {"num_prompts", c.num_prompts > 0 ? Json(c.num_prompts) : Json(nullptr)},
            {"warmup", c.warmup},
            {"gpus", c.gpus},
            {"seed", c.seed},
            {"temperature", c.request.temperature},
            {"ignore_eos", c.request.ignore_eos},
            {"extra_body", c.request.extra_body},
            {"tokenizer", c.tokenizer_dir.empty() ? std::string("server /tokenize") : c.tokenizer_dir}};
  if (w.kind == DatasetKind::kShareGpt) j["dataset_path"] = w.dataset_path;
  if (w.kind == DatasetKind::kAgentic) {
    j["turns"] = w.turns;
    j["tool_len"] = w.tool_len;
  }
  return j;
}

// `j` indented, its lines after the first shifted right by `shift` spaces.
std::string nested_dump(const Json& j, int shift) {
  std::string text = j.dump(1), out;
  for (const char ch : text) {
    out += ch;
    if (ch == '\n') out.append(static_cast<size_t>(shift), ' ');
  }
  return out;
}

// The results file: indented, except that each raw sample takes one line
// (a 1K-token request has a thousand inter-token gaps), after the summary.
std::string results_text(const Json& run) {
  std::string out = "{";
  for (auto it = run.begin(); it != run.end(); ++it) {
    out += fmt::format("{}\n {}: ", it == run.begin() ? "" : ",", Json(it.key()).dump());
    if (it.key() != "levels") {
      out += nested_dump(it.value(), 1);
      continue;
    }
    out += "[";
    for (size_t i = 0; i < it->size(); ++i) {
      const Json& level = (*it)[i];
      out += i ? ",\n  {" : "\n  {";
      for (auto f = level.begin(); f != level.end(); ++f) {
        if (f.key() == "samples") continue;
        out += fmt::format("\n   {}: {},", Json(f.key()).dump(), nested_dump(f.value(), 3));
      }
      const Json& samples = level.at("samples");
      out += "\n   \"samples\": [";
      for (size_t k = 0; k < samples.size(); ++k) out += (k ? ",\n    " : "\n    ") + samples[k].dump();
      out += "\n   ]\n  }";
    }
    out += "\n ]";
  }
  return out + "\n}\n";
}

std::string level_line(const Json& level) {
  const Json& s = level["summary"];
  return fmt::format("{}: {} ok, {} failed, {:.1f} output tok/s, {:.2f} tok/s/user, TTFT p50 {:.1f} ms, "
                     "TPOT p50 {:.2f} ms",
                     level.value("label", ""), s.value("completed", 0), s.value("failed", 0),
                     s.value("output_throughput", 0.0), s.value("tokens_per_s_per_user", 0.0),
                     s["ttft_ms"].value("p50", 0.0), s["tpot_ms"].value("p50", 0.0));
}

}  // namespace

Result<ServeBenchOutcome> run_serve_bench(ServeBenchConfig c) {
  M2_ASSIGN_OR_RETURN(BaseUrl url, parse_base_url(c.base_url));
  if (c.gpus < 1) return errorf("--gpus must be >= 1");
  HttpClient meta(url, c.api_key);
  if (c.model.empty()) {
    M2_ASSIGN_OR_RETURN(c.model, first_model(meta));
  }
  c.request.model = c.model;
  if (c.label.empty()) c.label = fmt::format("{} @ {}:{}", c.model, url.host, url.port);
  if (c.out_prefix.empty()) c.out_prefix = "bench-serve-" + utc_now("%Y%m%d-%H%M%S");
  if (c.seed == 0) {
    const auto now = std::chrono::system_clock::now().time_since_epoch();
    const int64_t us = std::chrono::duration_cast<std::chrono::microseconds>(now).count();
    c.seed = static_cast<uint64_t>(us % 2147483647) + 1;
    log_info("seed {} (--seed {} repeats these prompts)", c.seed, c.seed);
  }

  std::unique_ptr<TokenSource> tokens;
  if (c.tokenizer_dir.empty()) {
    tokens = server_token_source(url, c.api_key, c.model);
  } else {
    M2_ASSIGN_OR_RETURN(tokens, local_token_source(c.tokenizer_dir));
  }
  M2_ASSIGN_OR_RETURN(auto workload, Workload::create(c.workload, *tokens, c.seed));

  SigintGuard sigint;
  RunContext ctx;
  ctx.url = url;
  ctx.api_key = c.api_key;
  ctx.request = c.request;
  ctx.tokens = tokens.get();
  ctx.stop = &g_stop;
  ctx.progress = c.progress && ProgressBar::for_stderr(ProgressBar::Style::kOff) == ProgressBar::Style::kTerminal;
  const std::vector<LevelSpec> levels = level_specs(c);
  uint64_t level_seed = c.seed * 1000003 + 1;

  if (c.warmup > 0) {
    M2_ASSIGN_OR_RETURN(std::vector<Session> sessions, workload->sessions(c.warmup));
    LevelRun w = run_level(ctx, {std::min(c.warmup, 256), 0.0, "warmup"}, sessions, level_seed++);
    int64_t ok = 0;
    std::string error;
    for (const RequestSample& s : w.samples) {
      if (s.success) ++ok;
      else if (error.empty()) error = s.error;
    }
    log_info("warmup: {} requests ok, {} failed", ok, static_cast<int64_t>(w.samples.size()) - ok);
    if (ok == 0 && !w.interrupted) return errorf("every warm-up request failed: {}", error);
  }

  Json run = {{"format", "m2cpp-bench-serve/1"},
              {"label", c.label},
              {"started_at", utc_now("%Y-%m-%dT%H:%M:%SZ")},
              {"config", config_json(c)},
              {"interrupted", false},
              {"levels", Json::array()}};
  Status failure;  // building a level's prompts failed: the levels measured before are still written
  for (const LevelSpec& spec : levels) {
    if (g_stop.load()) break;
    auto sessions = workload->sessions(sessions_for(c, spec));
    if (!sessions.ok()) {
      failure = sessions.status().with_context(spec.label);
      break;
    }
    LevelRun level = run_level(ctx, spec, *sessions, level_seed++);
    Json lj = level_json(level, c.gpus);
    log_info("{}", level_line(lj));
    run["levels"].push_back(std::move(lj));
  }
  ServeBenchOutcome outcome;
  outcome.interrupted = g_stop.load();
  run["interrupted"] = outcome.interrupted;
  if (outcome.interrupted) log_warn("interrupted: reporting and writing what was measured so far");

  outcome.json_path = c.out_prefix + ".json";
  {
    std::ofstream out(outcome.json_path, std::ios::binary);
    out << results_text(run);
    if (!out) return errorf("{}: cannot write", outcome.json_path);
  }
  fmt::print("{}", format_report(run));
  M2_ASSIGN_OR_RETURN(Chart chart, pareto_chart({run}));
  outcome.svg_path = c.out_prefix + ".svg";
  M2_ASSIGN_OR_RETURN(outcome.png_path, write_plot(chart, outcome.svg_path));
  fmt::print("\nresults {}\nplot    {}{}\n", outcome.json_path, outcome.svg_path,
             outcome.png_path.empty() ? "" : ", " + outcome.png_path);
  if (!failure.ok())
    return failure.with_context(fmt::format("stopped (the levels before it are in {})", outcome.json_path));
  return outcome;
}

}  // namespace m2::loadgen
