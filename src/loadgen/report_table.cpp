#include "loadgen/report_table.h"

#include <fmt/format.h>

namespace m2::loadgen {
namespace {

double num(const Json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_number() ? it->get<double>() : 0.0;
}

std::string percent(const Json& v) { return v.is_number() ? fmt::format("{:.1f} %", v.get<double>() * 100) : "n/a"; }

}  // namespace

std::string format_report(const Json& run) {
  const Json& c = run["config"];
  auto len = [&](const char* key) { return c[key].is_number() ? c[key].dump() : std::string("as in the dataset"); };
  std::string o = fmt::format("\nserver {}  model {}  endpoint {}  dataset {}  input {}  output {}  gpus {}\n",
                              c.value("base_url", ""), c.value("model", ""), c.value("endpoint", ""),
                              c.value("dataset", ""), len("input_len"), len("output_len"), c.value("gpus", 1));
  o += fmt::format("\n{:<10} {:>6} {:>5} {:>9} {:>8} {:>11} {:>13} {:>11} {:>10}\n", "level", "ok", "err",
                   "time s", "req/s", "out tok/s", "out tok/s/GPU", "total tok/s", "tok/s/user");
  for (const Json& l : run["levels"]) {
    const Json& s = l["summary"];
    o += fmt::format("{:<10} {:>6} {:>5} {:>9.2f} {:>8.2f} {:>11.1f} {:>13.1f} {:>11.1f} {:>10.2f}\n",
                     l.value("label", ""), s.value("completed", 0), s.value("failed", 0), num(s, "duration_s"),
                     num(s, "request_throughput"), num(s, "output_throughput"), num(s, "output_throughput_per_gpu"),
                     num(s, "total_token_throughput"), num(s, "tokens_per_s_per_user"));
  }
  o += fmt::format("\n{:<10} {:<6} {:>10} {:>10} {:>10} {:>10}\n", "latency ms", "", "mean", "p50", "p90", "p99");
  for (const Json& l : run["levels"]) {
    const Json& s = l["summary"];
    bool first = true;
    for (const auto& [key, name] : {std::pair{"ttft_ms", "TTFT"}, std::pair{"tpot_ms", "TPOT"},
                                    std::pair{"itl_ms", "ITL"}, std::pair{"e2el_ms", "E2EL"}}) {
      const Json& d = s[key];
      o += fmt::format("{:<10} {:<6} {:>10.2f} {:>10.2f} {:>10.2f} {:>10.2f}\n", first ? l.value("label", "") : "",
                       name, num(d, "mean"), num(d, "p50"), num(d, "p90"), num(d, "p99"));
      first = false;
    }
  }
  o += "\n";
  for (const Json& l : run["levels"]) {
    const Json& s = l["summary"];
    const std::string label = l.value("label", "");
    if (l.value("interrupted", false))
      o += fmt::format("{}: interrupted (figures cover the requests that finished)\n", label);
    for (const Json& e : s["errors"])
      o += fmt::format("{}: {} x error: {}\n", label, e.value("count", 0), e.value("message", ""));
    if (s.value("output_len_mismatches", 0) > 0)
      o += fmt::format("{}: {} request(s) returned a different number of tokens than asked (ignore_eos unsupported?)\n",
                       label, s.value("output_len_mismatches", 0));
    if (s.value("usage_missing", 0) > 0)
      o += fmt::format("{}: {} request(s) without usage in the stream: output tokens counted as chunks\n", label,
                       s.value("usage_missing", 0));
    const Json& pc = s["prefix_cache"];
    if (!pc["server_hit_rate"].is_null() || !pc["cached_rate"].is_null())
      o += fmt::format("{}: prefix cache hit rate {} (server counters), {} (usage cached_tokens)\n", label,
                       percent(pc["server_hit_rate"]), percent(pc["cached_rate"]));
    if (s.contains("per_turn")) {
      o += fmt::format("{:<10} {:>5} {:>7} {:>13} {:>10} {:>10} {:>10} {:>11}\n", "  turn", "", "count",
                       "prompt tok", "TTFT mean", "TTFT p50", "TTFT p99", "cached");
      for (const Json& t : s["per_turn"]) {
        o += fmt::format("{:<10} {:>5} {:>7} {:>13.0f} {:>10.2f} {:>10.2f} {:>10.2f} {:>11}\n", "",
                         t.value("turn", 0) + 1, t.value("count", 0), num(t, "mean_prompt_tokens"),
                         num(t["ttft_ms"], "mean"), num(t["ttft_ms"], "p50"), num(t["ttft_ms"], "p99"),
                         percent(t["cached_rate"]));
      }
    }
  }
  return o;
}

}  // namespace m2::loadgen
