#include "loadgen/distribution.h"

#include <algorithm>
#include <cmath>

namespace m2::loadgen {

double percentile_sorted(const std::vector<double>& sorted, double p) {
  if (sorted.empty()) return 0;
  const double rank = std::clamp(p, 0.0, 100.0) / 100.0 * static_cast<double>(sorted.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(rank));
  const size_t hi = std::min(lo + 1, sorted.size() - 1);
  const double frac = rank - static_cast<double>(lo);
  return sorted[lo] + (sorted[hi] - sorted[lo]) * frac;
}

Distribution describe(std::vector<double> values) {
  Distribution d;
  if (values.empty()) return d;
  std::sort(values.begin(), values.end());
  d.count = static_cast<int64_t>(values.size());
  double sum = 0;
  for (double v : values) sum += v;
  d.mean = sum / static_cast<double>(values.size());
  double sq = 0;
  for (double v : values) sq += (v - d.mean) * (v - d.mean);
  d.std = std::sqrt(sq / static_cast<double>(values.size()));  // population std, as numpy.std
  d.min = values.front();
  d.max = values.back();
  d.p50 = percentile_sorted(values, 50);
  d.p90 = percentile_sorted(values, 90);
  d.p99 = percentile_sorted(values, 99);
  return d;
}

Json distribution_json(const Distribution& d, double scale) {
  return {{"count", d.count}, {"mean", d.mean * scale}, {"std", d.std * scale}, {"min", d.min * scale},
          {"p50", d.p50 * scale}, {"p90", d.p90 * scale}, {"p99", d.p99 * scale}, {"max", d.max * scale}};
}

}  // namespace m2::loadgen
