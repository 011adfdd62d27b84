// Sampling the next token from logits, vLLM's way, as the Backend::sample op
// takes it (one SampleRow per logit row), and the CPU reference of that op:
// logprobs from the raw logits; then the sparse edits (min_tokens banning,
// logit_bias, repetition / frequency / presence penalties); greedy argmax
// (lowest id on ties) or temperature, top-k, top-p, min-p and a draw.
//
// The draw is the Gumbel-max trick with counter-based noise: the kept token
// maximising (logit - max) / T + gumbel(seed, step, id) (model/philox.h).
// Its distribution is softmax(logit / T) over the kept tokens; the noise of
// a token depends only on (seed, output position, id), so a seeded request
// draws the same tokens on every backend, in any batch, after preemption.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "model/sampling_math.h"

namespace m2 {

constexpr int kMaxLogprobs = 20;  // top alternatives a row may ask for (vLLM's limit)

struct TokenLogprob {
  int32_t id;
  float logprob;
};

struct SampledToken {
  int32_t id = -1;
  float logprob = 0.0f;           // of `id` under the raw model distribution
  std::vector<TokenLogprob> top;  // the `logprobs` most likely under the raw distribution
};

struct TokenCount {
  int32_t id;
  int32_t count;
};

struct LogitBias {
  int32_t id;
  float bias;
};

// One logit row's sampling: parameters and penalty inputs (spans into
// caller-owned memory, valid for the call).
struct SampleRow {
  float temperature = 1.0f;  // <= 0: greedy
  int top_k = 0;             // <= 0: off
  float top_p = 1.0f;        // 1: off
  float min_p = 0.0f;        // 0: off
  float repetition_penalty = 1.0f;
  float frequency_penalty = 0.0f;
  float presence_penalty = 0.0f;
  int logprobs = -1;         // -1: none; n in 0..20: the chosen token's raw logprob and the top n
  uint64_t seed = 0;         // Philox key of the request (seed + completion index)
  uint64_t step = 0;         // output position being sampled (Philox counter)
  int32_t forced = -1;       // >= 0: emit this id, no draw (its logprobs still reported)
  std::span<const int32_t> banned;            // never drawn (EOS / stop ids below min_tokens)
  std::span<const LogitBias> logit_bias;
  std::span<const int32_t> prompt_ids;        // distinct prompt ids, ascending (repetition penalty)
  std::span<const TokenCount> output_counts;  // distinct generated ids with their counts
  // Constrained decoding (engine/constraint.h): empty = every token; else
  // ceil(vocab / 32) words, bit (id % 32) of word id / 32 set = id may be
  // drawn; the others are -inf for the draw (not for the logprobs, which
  // stay the raw distribution's). Ignored by a forced row.
  std::span<const uint32_t> allowed;

  bool greedy() const { return temperature <= 0.0f; }
};

// The row's edits, one per edited token, ascending by id (both backends
// apply exactly these).
std::vector<LogitEdit> logit_edits(const SampleRow& row);

// The CPU reference of Backend::sample for one row of `logits` [vocab]
// (modified: the edits are applied in place).
SampledToken sample_row(std::span<float> logits, const SampleRow& row);

// log-softmax of `logits` at `id`, and the k most likely tokens (descending,
// lower id first on ties).
float token_logprob(std::span<const float> logits, int32_t id, float* log_normalizer);
std::vector<TokenLogprob> top_logprobs(std::span<const float> logits, int k, float log_normalizer);
float log_sum_exp(std::span<const float> logits);

// Argmax of `logits`, lowest id on ties (0 if every logit is -inf or NaN).
int32_t argmax_lowest_id(std::span<const float> logits);

}  // namespace m2
