// The server's prefix-cache counters, read from its Prometheus /metrics:
// m2cpp's `m2cpp:prefix_cache_{hits,queries}_total` and vLLM's
// `vllm:prefix_cache_{hits,queries}[_total]` (prompt tokens found / looked
// up), summed over label sets (engines, models). Read before and after a
// level, their difference is the level's server-side hit rate.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "loadgen/http_client.h"

namespace m2::loadgen {

struct PrefixCacheCounters {
  double hits = 0, queries = 0;
};

// Every sample of a Prometheus text exposition, summed by metric name.
std::map<std::string, double> sum_prometheus_samples(std::string_view text);

// The counters in an exposition, or nullopt when it has neither family.
std::optional<PrefixCacheCounters> prefix_cache_counters(std::string_view metrics_text);

// GET /metrics and read them; nullopt when the server has no such metrics.
std::optional<PrefixCacheCounters> scrape_prefix_cache(HttpClient& client);

}  // namespace m2::loadgen
