#include "engine/sampler.h"

#include <algorithm>

namespace m2 {

SampleRow make_sample_row(Sequence& seq, std::span<const int32_t> eos_ids, SampleRowInputs* in) {
  const SamplingParams& p = seq.params;
  SampleRow r;
  r.temperature = p.temperature;
  r.top_k = p.top_k;
  r.top_p = p.top_p;
  r.min_p = p.min_p;
  r.repetition_penalty = p.repetition_penalty;
  r.frequency_penalty = p.frequency_penalty;
  r.presence_penalty = p.presence_penalty;
  r.logprobs = p.logprobs;
  r.seed = seq.seed;
  r.step = static_cast<uint64_t>(seq.num_output());
  if (!seq.forced.empty()) r.forced = seq.forced.front();
  if (seq.num_output() < p.min_tokens) {
    in->banned = p.stop_token_ids;
    if (!p.ignore_eos) in->banned.insert(in->banned.end(), eos_ids.begin(), eos_ids.end());
  }
  for (const auto& [id, bias] : p.logit_bias) in->bias.push_back({id, bias});
  const bool counts = p.repetition_penalty != 1.0f || p.frequency_penalty != 0.0f || p.presence_penalty != 0.0f;
  if (counts)
    for (const auto& [id, n] : seq.output_counts) in->counts.push_back({id, n});
  if (p.repetition_penalty != 1.0f && seq.prompt_ids.empty()) {
    seq.prompt_ids.assign(seq.tokens.begin(), seq.tokens.begin() + seq.num_prompt_tokens);
    std::sort(seq.prompt_ids.begin(), seq.prompt_ids.end());
    seq.prompt_ids.erase(std::unique(seq.prompt_ids.begin(), seq.prompt_ids.end()), seq.prompt_ids.end());
  }
  if (p.repetition_penalty != 1.0f) r.prompt_ids = seq.prompt_ids;
  r.banned = in->banned;
  r.logit_bias = in->bias;
  r.output_counts = in->counts;
  return r;
}

}  // namespace m2
