// The sampling fields of OpenAI requests (and vLLM's extensions) ->
// SamplingParams, over the model's defaults (generation_config.json).
#pragma once

#include <cstdint>
#include <optional>

#include "engine/sampling_params.h"
#include "util/json.h"
#include "util/status.h"

namespace m2::server {

enum class LogprobsStyle {
  kChat,        // `logprobs: bool` + `top_logprobs: int`
  kCompletion,  // `logprobs: int` (the top count; 0 = the sampled token only)
};

struct SamplingRequest {
  SamplingParams params;
  std::optional<int64_t> max_tokens;  // as requested; the default depends on the prompt
};

// Reads n, temperature, top_p, top_k, min_p, presence/frequency/repetition
// penalties, logit_bias, seed, max_tokens / max_completion_tokens,
// min_tokens, ignore_eos, stop, stop_token_ids, skip_special_tokens,
// logprobs / top_logprobs, prompt_logprobs; refuses what the engine cannot
// honour (include_stop_str_in_output, best_of != n) instead of ignoring it.
// The output-format fields are structured_output.h's.
Result<SamplingRequest> parse_sampling_request(const OrderedJson& body, const SamplingParams& defaults,
                                               LogprobsStyle style);

// Sets params.max_tokens for a prompt of `prompt_tokens`: the request's
// value, or what is left of the context. A prompt that leaves no room, or
// a request for more than is left, is an error giving both lengths.
Status fit_to_context(SamplingRequest& r, int64_t prompt_tokens, int64_t max_model_len, bool clamp_max_tokens);

}  // namespace m2::server
