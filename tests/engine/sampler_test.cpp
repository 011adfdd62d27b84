// Distribution tests of the sampler with fixed seeds: empirical frequencies
// against the probabilities each parameter defines.
#include "engine/sampler.h"

#include <gtest/gtest.h>

#include <cmath>
#include <numeric>

namespace m2 {
namespace {

const std::vector<float> kLogits = {2.0f, 1.0f, 0.5f, 0.0f, -1.0f, -3.0f};

std::vector<double> frequencies(SamplingParams p, int draws, uint64_t seed, std::vector<int32_t> banned = {},
                                std::vector<int32_t> output = {}) {
  std::mt19937_64 rng(seed);
  std::vector<double> f(kLogits.size(), 0.0);
  std::unordered_map<int32_t, int> counts;
  for (int32_t t : output) ++counts[t];
  for (int i = 0; i < draws; ++i) {
    std::vector<float> lg = kLogits;
    TokenHistory h{{}, output, &counts};
    f[sample_token(lg, p, h, banned, rng).id] += 1.0 / draws;
  }
  return f;
}

std::vector<double> softmax(std::vector<double> l, double t) {
  double m = *std::max_element(l.begin(), l.end()), s = 0;
  for (double& v : l) s += (v = std::exp((v - m) / t));
  for (double& v : l) v /= s;
  return l;
}

void expect_close(const std::vector<double>& got, const std::vector<double>& want, int draws) {
  for (size_t i = 0; i < want.size(); ++i) {
    const double sd = std::sqrt(std::max(want[i] * (1 - want[i]), 1e-12) / draws);
    EXPECT_NEAR(got[i], want[i], 5 * sd + 1e-9) << "token " << i;
  }
}

SamplingParams plain(float t) {
  SamplingParams p;
  p.temperature = t;
  p.top_p = 1.0f;
  p.top_k = 0;
  return p;
}

TEST(Sampler, TemperatureScalesTheSoftmax) {
  const int draws = 40000;
  std::vector<double> l(kLogits.begin(), kLogits.end());
  for (float t : {1.0f, 0.5f, 2.0f}) expect_close(frequencies(plain(t), draws, 1), softmax(l, t), draws);
}

TEST(Sampler, GreedyIsArgmaxWithLowerIdOnTies) {
  SamplingParams p = plain(0.0f);
  std::mt19937_64 rng(0);
  std::vector<float> lg = {1.0f, 3.0f, 3.0f, 2.0f};
  EXPECT_EQ(sample_token(lg, p, {}, {}, rng).id, 1);
}

TEST(Sampler, TopKKeepsTheKMostLikely) {
  SamplingParams p = plain(1.0f);
  p.top_k = 2;
  const int draws = 20000;
  auto w = softmax({2.0, 1.0}, 1.0);
  expect_close(frequencies(p, draws, 2), {w[0], w[1], 0, 0, 0, 0}, draws);
}

TEST(Sampler, TopPKeepsTheSmallestPrefixReachingP) {
  SamplingParams p = plain(1.0f);
  auto full = softmax({2, 1, 0.5, 0, -1, -3}, 1.0);  // 0.55, 0.20, 0.12, ...
  p.top_p = static_cast<float>(full[0] + full[1] - 0.01);  // needs tokens 0 and 1
  const int draws = 20000;
  const double m = full[0] + full[1];
  expect_close(frequencies(p, draws, 3), {full[0] / m, full[1] / m, 0, 0, 0, 0}, draws);
}

TEST(Sampler, MinPDropsUnlikelyTokens) {
  SamplingParams p = plain(1.0f);
  auto full = softmax({2, 1, 0.5, 0, -1, -3}, 1.0);
  p.min_p = static_cast<float>(full[2] / full[0] + 1e-3);  // token 2 just below the floor
  const int draws = 20000;
  const double m = full[0] + full[1];
  expect_close(frequencies(p, draws, 4), {full[0] / m, full[1] / m, 0, 0, 0, 0}, draws);
}

TEST(Sampler, LogitBiasShiftsTheDistribution) {
  SamplingParams p = plain(1.0f);
  p.logit_bias[5] = 5.0f;  // -3 -> 2: ties with token 0
  const int draws = 40000;
  expect_close(frequencies(p, draws, 5), softmax({2, 1, 0.5, 0, -1, 2}, 1.0), draws);
}

TEST(Sampler, PresenceAndFrequencyPenaltiesUseOutputCounts) {
  SamplingParams p = plain(1.0f);
  p.presence_penalty = 0.5f;
  p.frequency_penalty = 0.25f;
  const int draws = 40000;
  // Token 0 generated twice: 2 - 0.5 - 2*0.25 = 1.0; token 3 once: 0 - 0.75.
  expect_close(frequencies(p, draws, 6, {}, {0, 0, 3}), softmax({1.0, 1, 0.5, -0.75, -1, -3}, 1.0), draws);
}

TEST(Sampler, RepetitionPenaltyDividesPositiveAndMultipliesNegative) {
  SamplingParams p = plain(1.0f);
  p.repetition_penalty = 2.0f;
  const int draws = 40000;
  // Tokens 0 (2 -> 1) and 4 (-1 -> -2) are in the history.
  expect_close(frequencies(p, draws, 7, {}, {0, 4}), softmax({1, 1, 0.5, 0, -2, -3}, 1.0), draws);
}

TEST(Sampler, BannedTokensAreNeverDrawn) {
  SamplingParams p = plain(1.0f);
  const auto f = frequencies(p, 5000, 8, {0, 1});
  EXPECT_EQ(f[0], 0.0);
  EXPECT_EQ(f[1], 0.0);
}

TEST(Sampler, SameSeedSameTokens) {
  SamplingParams p = plain(1.0f);
  EXPECT_EQ(frequencies(p, 1000, 42), frequencies(p, 1000, 42));
  EXPECT_NE(frequencies(p, 1000, 42), frequencies(p, 1000, 43));
}

TEST(Sampler, LogprobsAreRawLogSoftmaxWithTopAlternatives) {
  SamplingParams p = plain(0.0f);
  p.logprobs = 3;
  p.logit_bias[5] = 100.0f;  // changes the choice, not the reported raw logprobs
  std::mt19937_64 rng(0);
  std::vector<float> lg = kLogits;
  const SampledToken t = sample_token(lg, p, {}, {}, rng);
  auto want = softmax({2, 1, 0.5, 0, -1, -3}, 1.0);
  EXPECT_EQ(t.id, 5);
  EXPECT_NEAR(t.logprob, std::log(want[5]), 1e-5);
  ASSERT_EQ(t.top.size(), 3u);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(t.top[i].id, i);
    EXPECT_NEAR(t.top[i].logprob, std::log(want[i]), 1e-5);
  }
}

TEST(SamplingParams, ValidationNamesTheField) {
  SamplingParams p;
  p.top_p = 0.0f;
  EXPECT_NE(p.validate(10).message().find("top_p"), std::string::npos);
  p = SamplingParams();
  p.logit_bias[10] = 1.0f;
  EXPECT_NE(p.validate(10).message().find("logit_bias token 10"), std::string::npos);
  p = SamplingParams();
  p.logprobs = 21;
  EXPECT_FALSE(p.validate(10).ok());
  EXPECT_TRUE(SamplingParams().validate(10).ok());
}

}  // namespace
}  // namespace m2
