// Per-request generation controls, with vLLM's meaning for each field.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/constraint.h"
#include "engine/text_stop.h"
#include "util/json.h"
#include "util/status.h"

namespace m2 {

struct SamplingParams {
  int n = 1;                          // completions per prompt (share the prompt's KV blocks)
  float temperature = 1.0f;           // 0 = greedy
  float top_p = 0.95f;                // nucleus mass kept (1 = off)
  int top_k = 40;                     // keep the k most likely (0 or -1 = off)
  float min_p = 0.0f;                 // drop tokens below min_p × p(max)
  float presence_penalty = 0.0f;      // subtracted once per distinct generated token
  float frequency_penalty = 0.0f;     // subtracted per occurrence in the generated tokens
  float repetition_penalty = 1.0f;    // divides positive / multiplies negative logits of prompt+generated tokens
  std::map<int32_t, float> logit_bias;
  std::optional<uint64_t> seed;       // reproducible sampling per request
  int max_tokens = 16;
  int min_tokens = 0;                 // EOS and stop ids are masked until this many
  bool ignore_eos = false;
  std::vector<std::string> stop;      // stop strings, excluded from the output
  std::vector<int32_t> stop_token_ids;
  bool skip_special_tokens = true;
  int logprobs = -1;                  // -1: none; k >= 0: sampled token's logprob + top k (k <= 20)
  int prompt_logprobs = -1;           // same, for each prompt position
  // Forced tokens are emitted in place of a sampled token, one per step; the
  // model still runs them (their K/V are cached like any output) and their
  // logprobs are read from its distribution. Stop conditions apply as usual.
  //  - forced_tokens: from the first generated token on (the server's
  //    test-only --replay source), then sampling resumes;
  //  - forced_after: inserted right after the sequence first produces
  //    forced_after_token (tool_choice "required" / a named function: the
  //    tool-call opening once the model closes its reasoning with `</think>`).
  std::vector<int32_t> forced_tokens;
  int32_t forced_after_token = -1;    // -1: off
  std::vector<int32_t> forced_after;
  // A reasoning budget (vLLM's thinking_token_budget): the prompt opened the
  // reasoning, and once `reasoning_budget` tokens have been generated without
  // `reasoning_end_token` (`</think>`), that token is forced next, so the
  // reasoning holds exactly the budget and the answer follows. -1: off.
  int reasoning_budget = -1;
  int32_t reasoning_end_token = -1;
  // Routed experts (docs/rollout.md): return the top-k expert ids of every
  // position the model runs for this sequence (prompt included: its prefix
  // cache lookup is skipped), [prompt + output - 1, layers, top_k].
  bool return_routed_experts = false;
  // Routing replay: the expert ids [rows, layers, top_k] the MoE uses for the
  // first `rows` prompt positions instead of the router's top-k (rows <= the
  // prompt's length); null: none.
  std::shared_ptr<const std::vector<int32_t>> routing_replay;
  // Constrained decoding (constraint.h): every sampled token from the
  // constraint's start on is drawn from the tokens its grammar allows. It
  // starts at the first generated token, or, with constraint_after_token
  // >= 0, right after the sequence first produces that token (`</think>`:
  // the answer after the reasoning is constrained, the reasoning is not).
  // Forced tokens are fed to the grammar like sampled ones. null: none.
  std::shared_ptr<const Constraint> constraint;
  int32_t constraint_after_token = -1;
  // A stop condition on the text, kept in the output (text_stop.h); null: none.
  std::shared_ptr<const TextStopFactory> text_stop;

  bool greedy() const { return temperature <= 0.0f; }
  Status validate(int vocab_size) const;
};

// The model card's defaults (temperature 1.0, top_p 0.95, top_k 40), overridden
// by the model directory's generation_config.json when present.
SamplingParams default_sampling_params(const std::string& model_dir);

// Applies a generation_config.json object (temperature, top_p, top_k,
// repetition_penalty, ...) over `p`.
void apply_generation_config(const Json& gc, SamplingParams* p);

}  // namespace m2
