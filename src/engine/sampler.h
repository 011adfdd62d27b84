// Turns one sequence's next-token logits into a token, vLLM's way:
// logprobs from the raw logits; then min_tokens masking, logit_bias,
// repetition / frequency / presence penalties; greedy argmax (lowest id on
// ties) or temperature, top-k, top-p, min-p and a draw from the request's
// own seeded generator.
#pragma once

#include <cstdint>
#include <random>
#include <span>
#include <unordered_map>
#include <vector>

#include "engine/sampling_params.h"

namespace m2 {

struct TokenLogprob {
  int32_t id;
  float logprob;
};

struct SampledToken {
  int32_t id = -1;
  float logprob = 0.0f;             // of `id` under the raw model distribution
  std::vector<TokenLogprob> top;    // the `logprobs` most likely under the raw distribution
};

// What the penalties look at.
struct TokenHistory {
  std::span<const int32_t> prompt;
  std::span<const int32_t> output;
  const std::unordered_map<int32_t, int>* output_counts = nullptr;  // id -> occurrences in `output`
};

// `logits` [vocab] is modified. `banned` (EOS and stop ids while below
// min_tokens) can never be drawn.
SampledToken sample_token(std::span<float> logits, const SamplingParams& params, const TokenHistory& history,
                          std::span<const int32_t> banned, std::mt19937_64& rng);

// A token emitted without sampling (SamplingParams::forced_*), with its
// logprob and the top `logprobs` (when >= 0) under the raw distribution. The
// generator is not advanced.
SampledToken forced_token(std::span<const float> logits, int32_t id, int logprobs);

// log-softmax of `logits` at `id`, and the k most likely tokens (descending,
// lower id first on ties).
float token_logprob(std::span<const float> logits, int32_t id, float* log_normalizer);
std::vector<TokenLogprob> top_logprobs(std::span<const float> logits, int k, float log_normalizer);
float log_sum_exp(std::span<const float> logits);

}  // namespace m2
