// Percentiles and summaries of the serving benchmark, checked against the
// values numpy.percentile (linear interpolation) gives.
#include <gtest/gtest.h>

#include "loadgen/distribution.h"

namespace m2::loadgen {
namespace {

TEST(BenchDistribution, PercentilesMatchNumpyLinear) {
  const std::vector<double> v = {1, 2, 3, 4, 10};  // sorted
  // numpy.percentile([1,2,3,4,10], [0, 50, 90, 99, 100]) = [1, 3, 7.6, 9.76, 10]
  EXPECT_DOUBLE_EQ(percentile_sorted(v, 0), 1);
  EXPECT_DOUBLE_EQ(percentile_sorted(v, 50), 3);
  EXPECT_NEAR(percentile_sorted(v, 90), 7.6, 1e-12);
  EXPECT_NEAR(percentile_sorted(v, 99), 9.76, 1e-12);
  EXPECT_DOUBLE_EQ(percentile_sorted(v, 100), 10);
  // numpy.percentile([5, 1], 50) = 3 (even count: midpoint)
  EXPECT_DOUBLE_EQ(percentile_sorted({1, 5}, 50), 3);
  EXPECT_DOUBLE_EQ(percentile_sorted({7}, 99), 7);
  EXPECT_DOUBLE_EQ(percentile_sorted({}, 50), 0);
}

TEST(BenchDistribution, DescribeSortsAndSummarises) {
  const Distribution d = describe({10, 4, 1, 3, 2});
  EXPECT_EQ(d.count, 5);
  EXPECT_DOUBLE_EQ(d.mean, 4);
  EXPECT_NEAR(d.std, 3.1622776601683795, 1e-12);  // numpy.std (population)
  EXPECT_DOUBLE_EQ(d.min, 1);
  EXPECT_DOUBLE_EQ(d.max, 10);
  EXPECT_DOUBLE_EQ(d.p50, 3);
  EXPECT_NEAR(d.p90, 7.6, 1e-12);
  const Json j = distribution_json(d, 1e3);
  EXPECT_DOUBLE_EQ(j["mean"].get<double>(), 4000);
  EXPECT_DOUBLE_EQ(j["p50"].get<double>(), 3000);
  EXPECT_EQ(j["count"], 5);
  EXPECT_EQ(describe({}).count, 0);
}

}  // namespace
}  // namespace m2::loadgen
