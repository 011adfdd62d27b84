#include "engine/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

namespace m2 {
namespace {
constexpr float kNegInf = -std::numeric_limits<float>::infinity();
}

float log_sum_exp(std::span<const float> logits) {
  float m = kNegInf;
  for (float v : logits) m = std::max(m, v);
  if (m == kNegInf) return m;
  double s = 0;
  for (float v : logits) s += std::exp(static_cast<double>(v - m));
  return m + static_cast<float>(std::log(s));
}

float token_logprob(std::span<const float> logits, int32_t id, float* log_normalizer) {
  const float z = log_sum_exp(logits);
  if (log_normalizer) *log_normalizer = z;
  return logits[id] - z;
}

std::vector<TokenLogprob> top_logprobs(std::span<const float> logits, int k, float log_normalizer) {
  std::vector<TokenLogprob> out;
  if (k <= 0) return out;
  std::vector<int32_t> idx(logits.size());
  std::iota(idx.begin(), idx.end(), 0);
  const size_t kk = std::min<size_t>(k, idx.size());
  auto better = [&](int32_t a, int32_t b) { return logits[a] != logits[b] ? logits[a] > logits[b] : a < b; };
  std::partial_sort(idx.begin(), idx.begin() + kk, idx.end(), better);
  for (size_t i = 0; i < kk; ++i) out.push_back({idx[i], logits[idx[i]] - log_normalizer});
  return out;
}

SampledToken forced_token(std::span<const float> logits, int32_t id, int logprobs) {
  SampledToken out;
  out.id = id;
  if (logprobs >= 0) {
    float log_z = 0;
    out.logprob = token_logprob(logits, id, &log_z);
    out.top = top_logprobs(logits, logprobs, log_z);
  }
  return out;
}

SampledToken sample_token(std::span<float> logits, const SamplingParams& p, const TokenHistory& h,
                          std::span<const int32_t> banned, std::mt19937_64& rng) {
  const int64_t V = static_cast<int64_t>(logits.size());
  SampledToken out;
  // Raw-distribution logprobs (vLLM's default logprobs mode), before any processing.
  float log_z = 0;
  const bool want_logprobs = p.logprobs >= 0;
  if (want_logprobs) {
    log_z = log_sum_exp(logits);
    out.top = top_logprobs(logits, p.logprobs, log_z);
  }
  std::vector<float> raw;  // kept only to read the sampled token's raw logprob
  if (want_logprobs) raw.assign(logits.begin(), logits.end());

  for (int32_t id : banned) logits[id] = kNegInf;
  for (const auto& [id, bias] : p.logit_bias) logits[id] += bias;
  if (p.repetition_penalty != 1.0f) {
    auto penalize = [&](int32_t id) {
      float& l = logits[id];
      l = l > 0 ? l / p.repetition_penalty : l * p.repetition_penalty;
    };
    std::vector<bool> seen(V, false);
    for (auto span : {h.prompt, h.output})
      for (int32_t id : span)
        if (!seen[id]) seen[id] = true, penalize(id);
  }
  if ((p.frequency_penalty != 0.0f || p.presence_penalty != 0.0f) && h.output_counts) {
    for (const auto& [id, count] : *h.output_counts)
      logits[id] -= p.frequency_penalty * count + p.presence_penalty;
  }

  if (p.greedy()) {
    int32_t best = 0;
    for (int32_t i = 1; i < V; ++i)
      if (logits[i] > logits[best]) best = i;
    out.id = best;
  } else {
    // Candidates in descending order of logit (lower id first on ties).
    std::vector<int32_t> cand(V);
    std::iota(cand.begin(), cand.end(), 0);
    auto better = [&](int32_t a, int32_t b) { return logits[a] != logits[b] ? logits[a] > logits[b] : a < b; };
    size_t keep = V;
    if (p.top_k > 0 && p.top_k < V) {
      keep = p.top_k;
      std::partial_sort(cand.begin(), cand.begin() + keep, cand.end(), better);
    } else {
      std::sort(cand.begin(), cand.end(), better);
    }
    while (keep > 0 && logits[cand[keep - 1]] == kNegInf) --keep;
    if (keep == 0) {  // everything banned: fall back to the raw argmax
      out.id = static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
    } else {
      // Probabilities at temperature T over the kept candidates.
      const double inv_t = 1.0 / p.temperature;
      const double top = logits[cand[0]];
      std::vector<double> prob(keep);
      double sum = 0;
      for (size_t i = 0; i < keep; ++i) sum += prob[i] = std::exp((logits[cand[i]] - top) * inv_t);
      for (double& q : prob) q /= sum;
      // top-p: smallest prefix whose mass reaches top_p (at least one token).
      if (p.top_p < 1.0f) {
        double mass = 0;
        size_t k = 0;
        while (k < keep && mass < p.top_p) mass += prob[k++];
        keep = std::max<size_t>(k, 1);
      }
      // min-p: drop tokens below min_p × the most likely one.
      if (p.min_p > 0.0f) {
        const double floor = p.min_p * prob[0];
        size_t k = 1;
        while (k < keep && prob[k] >= floor) ++k;
        keep = k;
      }
      double kept = 0;
      for (size_t i = 0; i < keep; ++i) kept += prob[i];
      // 53 random bits -> u in [0, kept).
      const double u = static_cast<double>(rng() >> 11) * 0x1.0p-53 * kept;
      double acc = 0;
      size_t i = 0;
      for (; i + 1 < keep; ++i) {
        acc += prob[i];
        if (u < acc) break;
      }
      out.id = cand[i];
    }
  }
  if (want_logprobs) out.logprob = raw[out.id] - log_z;
  return out;
}

}  // namespace m2
