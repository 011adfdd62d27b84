// Distribution tests of the sampler (model/sampling.*, the rows the engine
// builds) with fixed seeds: empirical frequencies over many output positions
// against the probabilities each parameter defines.
#include "engine/sampler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>

#include "model/philox.h"
#include "model/sampling.h"

namespace m2 {
namespace {

const std::vector<float> kLogits = {2.0f, 1.0f, 0.5f, 0.0f, -1.0f, -3.0f};

// The row of a sequence with an empty prompt, `output` generated so far and
// `banned` ids (min_tokens), at output position `step`.
SampledToken sample(std::vector<float> lg, const SamplingParams& p, uint64_t seed, uint64_t step,
                    const std::vector<int32_t>& banned = {}, const std::vector<int32_t>& output = {}) {
  std::vector<TokenCount> counts;
  for (int32_t t : output) {
    auto it = std::find_if(counts.begin(), counts.end(), [&](const TokenCount& c) { return c.id == t; });
    if (it == counts.end()) counts.push_back({t, 1});
    else ++it->count;
  }
  std::vector<LogitBias> bias;
  for (const auto& [id, b] : p.logit_bias) bias.push_back({id, b});
  SampleRow r;
  r.temperature = p.temperature, r.top_k = p.top_k, r.top_p = p.top_p, r.min_p = p.min_p;
  r.repetition_penalty = p.repetition_penalty, r.frequency_penalty = p.frequency_penalty;
  r.presence_penalty = p.presence_penalty, r.logprobs = p.logprobs;
  r.seed = seed, r.step = step;
  r.banned = banned, r.logit_bias = bias, r.output_counts = counts;
  return sample_row(lg, r);
}

std::vector<double> frequencies(SamplingParams p, int draws, uint64_t seed, std::vector<int32_t> banned = {},
                                std::vector<int32_t> output = {}) {
  std::vector<double> f(kLogits.size(), 0.0);
  for (int i = 0; i < draws; ++i) f[sample(kLogits, p, seed, i, banned, output).id] += 1.0 / draws;
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
  EXPECT_EQ(sample({1.0f, 3.0f, 3.0f, 2.0f}, p, 0, 0).id, 1);
  EXPECT_EQ(sample({-INFINITY, -INFINITY}, p, 0, 0).id, 0);  // everything banned: token 0
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
  const SampledToken t = sample(kLogits, p, 0, 0);
  auto want = softmax({2, 1, 0.5, 0, -1, -3}, 1.0);
  EXPECT_EQ(t.id, 5);
  EXPECT_NEAR(t.logprob, std::log(want[5]), 1e-5);
  ASSERT_EQ(t.top.size(), 3u);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(t.top[i].id, i);
    EXPECT_NEAR(t.top[i].logprob, std::log(want[i]), 1e-5);
  }
}

TEST(Sampler, RepetitionPenaltyCoversThePrompt) {
  SamplingParams p = plain(0.0f);
  p.repetition_penalty = 4.0f;
  std::vector<int32_t> prompt = {0};  // 2 -> 0.5: token 1 (1.0) wins
  std::vector<float> lg = kLogits;
  SampleRow r;
  r.temperature = 0.0f, r.repetition_penalty = 4.0f, r.prompt_ids = prompt;
  EXPECT_EQ(sample_row(lg, r).id, 1);
  EXPECT_EQ(lg[0], 0.5f);
}

TEST(Sampler, EditsMergePerTokenInVllmOrder) {
  SampleRow r;
  const std::vector<int32_t> banned = {3}, prompt = {1, 2};
  const std::vector<LogitBias> bias = {{2, 1.0f}, {3, 5.0f}};
  const std::vector<TokenCount> counts = {{2, 3}};
  r.banned = banned, r.logit_bias = bias, r.prompt_ids = prompt, r.output_counts = counts;
  r.repetition_penalty = 2.0f, r.frequency_penalty = 0.5f, r.presence_penalty = 0.25f;
  const std::vector<LogitEdit> e = logit_edits(r);
  ASSERT_EQ(e.size(), 3u);
  EXPECT_EQ(e[0].id, 1);
  EXPECT_EQ(e[1].id, 2);
  EXPECT_EQ(e[2].id, 3);
  EXPECT_EQ(apply_logit_edit(3.0f, e[0], 2.0f), 1.5f);
  EXPECT_EQ(apply_logit_edit(3.0f, e[1], 2.0f), (3.0f + 1.0f) / 2.0f - (0.5f * 3 + 0.25f));  // bias, repeat, subtract
  EXPECT_EQ(apply_logit_edit(-3.0f, e[1], 2.0f), (-3.0f + 1.0f) * 2.0f - 1.75f);
  EXPECT_EQ(apply_logit_edit(3.0f, e[2], 2.0f), -INFINITY);  // banned wins over the bias
}

TEST(Sampler, ForcedTokenReportsItsRawLogprob) {
  SampleRow r;
  r.forced = 4;
  r.logprobs = 2;
  std::vector<float> lg = kLogits;
  const SampledToken t = sample_row(lg, r);
  auto want = softmax({2, 1, 0.5, 0, -1, -3}, 1.0);
  EXPECT_EQ(t.id, 4);
  EXPECT_NEAR(t.logprob, std::log(want[4]), 1e-5);
  ASSERT_EQ(t.top.size(), 2u);
  EXPECT_EQ(t.top[1].id, 1);
}

TEST(Sampler, SeededDrawsDependOnSeedAndPositionOnly) {
  // No generator state: (seed, position) alone fixes the draw, whatever was
  // drawn before or in which order.
  SamplingParams p = plain(1.0f);
  std::vector<float> lg(1000);
  for (size_t i = 0; i < lg.size(); ++i) lg[i] = std::sin(0.37f * i) * 3.0f;
  std::vector<int32_t> forward, backward(50);
  for (uint64_t step = 0; step < 50; ++step) forward.push_back(sample(lg, p, 9, step).id);
  for (int step = 49; step >= 0; --step) backward[step] = sample(lg, p, 9, step).id;
  EXPECT_EQ(forward, backward);
  int differ = 0;
  for (uint64_t step = 0; step < 50; ++step) differ += sample(lg, p, 10, step).id != forward[step];
  EXPECT_GT(differ, 25) << "another seed should give other tokens";
}

// Random123's known-answer vectors (tests/kat_vectors, "philox4x32 10" lines).
TEST(Philox, MatchesKnownAnswers) {
  struct Kat {
    Philox4x32 ctr;
    uint32_t k0, k1;
    Philox4x32 want;
  };
  const Kat kats[] = {
      {{{0, 0, 0, 0}}, 0, 0, {{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}}},
      {{{~0u, ~0u, ~0u, ~0u}}, ~0u, ~0u, {{0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}}},
      {{{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}}, 0xa4093822, 0x299f31d0,
       {{0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}}},
  };
  for (const Kat& k : kats) {
    const Philox4x32 got = philox4x32_10(k.ctr, k.k0, k.k1);
    for (int i = 0; i < 4; ++i) EXPECT_EQ(got.v[i], k.want.v[i]) << "word " << i << " of the vector for key " << k.k0;
  }
}

TEST(Philox, UniformsAreInTheOpenIntervalAndUniform) {
  // 100k uniforms of one (seed, step) over ids: 10 bins, chi-square with 9
  // degrees of freedom below 27.9 (p = 0.001).
  std::vector<double> bins(10, 0);
  for (uint32_t id = 0; id < 100000; ++id) {
    const double u = sampling_uniform(123, 4, id);
    ASSERT_GT(u, 0.0);
    ASSERT_LT(u, 1.0);
    bins[static_cast<int>(u * 10)] += 1;
  }
  double chi2 = 0;
  for (double b : bins) chi2 += (b - 10000) * (b - 10000) / 10000;
  EXPECT_LT(chi2, 27.9);
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

namespace m2 {
namespace {

// On a large vocabulary the sampler sorts only the rank prefix its filters
// reach (re-sorting more while top-p's mass is short) or nothing at all (a
// temperature alone): every draw must be the one a brute-force full sort
// followed by the same Gumbel-max gives.
TEST(Sampler, LargeVocabularyDrawsMatchBruteForce) {
  const int V = 20000;
  std::mt19937 g(3);
  std::normal_distribution<float> nd(0.0f, 2.0f);
  std::vector<float> logits(V);
  for (float& x : logits) x = nd(g);
  logits[17] = -std::numeric_limits<float>::infinity();  // never drawable
  struct Case {
    float temperature, top_p, min_p;
    int top_k;
  };
  for (const Case& c : {Case{1.0f, 1.0f, 0.0f, 0}, Case{1.0f, 0.9f, 0.0f, 0}, Case{0.7f, 0.5f, 0.0f, 0},
                        Case{1.0f, 1.0f, 1e-3f, 0}, Case{1.0f, 0.95f, 0.0f, 5000}, Case{1.3f, 0.99f, 1e-4f, 0}}) {
    std::vector<int32_t> order;
    for (int32_t i = 0; i < V; ++i)
      if (std::isfinite(logits[i])) order.push_back(i);
    std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
      return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
    });
    size_t keep = order.size();
    if (c.top_k > 0 && static_cast<size_t>(c.top_k) < keep) keep = c.top_k;
    const double top = logits[order[0]], inv_t = 1.0 / static_cast<double>(c.temperature);
    std::vector<double> w(keep);
    double sum = 0;
    for (size_t i = 0; i < keep; ++i) sum += w[i] = std::exp((logits[order[i]] - top) * inv_t);
    if (c.top_p < 1.0f) {
      const double target = c.top_p * sum;
      double mass = 0;
      size_t k = 0;
      while (k < keep && mass < target) mass += w[k++];
      keep = std::max<size_t>(k, 1);
    }
    if (c.min_p > 0.0f) {
      size_t k = 1;
      while (k < keep && w[k] >= c.min_p) ++k;
      keep = k;
    }
    for (uint64_t step = 0; step < 16; ++step) {
      size_t best = 0;
      double best_key = -std::numeric_limits<double>::infinity();
      for (size_t i = 0; i < keep; ++i) {
        const double key = (logits[order[i]] - top) * inv_t + sampling_gumbel(9, step, static_cast<uint32_t>(order[i]));
        if (key > best_key || (key == best_key && order[i] < order[best])) best_key = key, best = i;
      }
      SampleRow r;
      r.temperature = c.temperature, r.top_p = c.top_p, r.min_p = c.min_p, r.top_k = c.top_k;
      r.seed = 9, r.step = step;
      std::vector<float> lg = logits;
      EXPECT_EQ(sample_row(lg, r).id, order[best])
          << "T " << c.temperature << " top_p " << c.top_p << " min_p " << c.min_p << " top_k " << c.top_k
          << " step " << step << " (" << keep << " kept)";
    }
  }
}

}  // namespace
}  // namespace m2
