// Summary statistics of a set of latencies: mean and percentiles with
// numpy's default (linear) interpolation, as vLLM's and SGLang's serving
// benchmarks compute them, so that the figures compare one to one.
#pragma once

#include <cstdint>
#include <vector>

#include "util/json.h"

namespace m2::loadgen {

// The p-th percentile (0..100) of values sorted ascending: linear
// interpolation between the closest ranks (numpy.percentile's default).
// 0 for an empty set.
double percentile_sorted(const std::vector<double>& sorted, double p);

struct Distribution {
  int64_t count = 0;
  double mean = 0, std = 0, min = 0, p50 = 0, p90 = 0, p99 = 0, max = 0;
};

Distribution describe(std::vector<double> values);

// {"count", "mean", "std", "min", "p50", "p90", "p99", "max"}, every value
// multiplied by `scale` (1e3: seconds to milliseconds).
Json distribution_json(const Distribution& d, double scale);

}  // namespace m2::loadgen
