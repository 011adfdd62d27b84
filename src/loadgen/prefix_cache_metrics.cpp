#include "loadgen/prefix_cache_metrics.h"

#include <cstdlib>

namespace m2::loadgen {

std::map<std::string, double> sum_prometheus_samples(std::string_view text) {
  std::map<std::string, double> sums;
  while (!text.empty()) {
    const size_t eol = text.find('\n');
    std::string_view line = text.substr(0, eol);
    text = eol == std::string_view::npos ? std::string_view() : text.substr(eol + 1);
    if (line.empty() || line.front() == '#') continue;
    const size_t name_end = line.find_first_of("{ \t");
    if (name_end == std::string_view::npos) continue;
    const std::string name(line.substr(0, name_end));
    size_t value_at = name_end;
    if (line[name_end] == '{') {
      // Label values may hold spaces or braces inside quotes.
      bool quoted = false;
      for (value_at = name_end + 1; value_at < line.size(); ++value_at) {
        const char c = line[value_at];
        if (quoted && c == '\\') ++value_at;
        else if (c == '"') quoted = !quoted;
        else if (c == '}' && !quoted) break;
      }
      ++value_at;
    }
    if (value_at >= line.size()) continue;
    const std::string rest(line.substr(value_at));
    char* end = nullptr;
    const double v = std::strtod(rest.c_str(), &end);
    if (end == rest.c_str()) continue;
    sums[name] += v;
  }
  return sums;
}

std::optional<PrefixCacheCounters> prefix_cache_counters(std::string_view metrics_text) {
  const auto sums = sum_prometheus_samples(metrics_text);
  for (const char* prefix : {"m2cpp:prefix_cache_", "vllm:prefix_cache_"}) {
    for (const char* suffix : {"_total", ""}) {
      auto hits = sums.find(std::string(prefix) + "hits" + suffix);
      auto queries = sums.find(std::string(prefix) + "queries" + suffix);
      if (hits != sums.end() && queries != sums.end()) return PrefixCacheCounters{hits->second, queries->second};
    }
  }
  return std::nullopt;
}

std::optional<PrefixCacheCounters> scrape_prefix_cache(HttpClient& client) {
  auto reply = client.get("/metrics");
  if (!reply.ok() || reply->status != 200) return std::nullopt;
  return prefix_cache_counters(reply->body);
}

}  // namespace m2::loadgen
