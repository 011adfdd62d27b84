// One generation stream: its tokens, its KV blocks, how far the model has
// computed it, and what it has produced. A request with n > 1 owns n
// sequences.
#pragma once

#include <cstdint>
#include <deque>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/constraint.h"
#include "engine/sampling_params.h"
#include "model/sampling.h"

namespace m2 {

enum class SeqState { kWaiting, kRunning, kFinished };
enum class FinishReason { kNone, kStop, kLength, kAbort };

struct Sequence {
  int64_t id = 0;
  std::string request_id;
  int index = 0;                     // which of the request's n completions
  int priority = 0;                  // lower runs first (vLLM's convention)
  int64_t arrival = 0;               // admission order, for FCFS within a priority
  SamplingParams params;
  uint64_t seed = 0;                 // Philox key of its draws: request seed + index, else random

  std::vector<int32_t> tokens;       // prompt followed by generated tokens
  int64_t num_prompt_tokens = 0;
  int64_t num_computed = 0;          // tokens whose K/V are in the cache
  int64_t num_cached_prompt = 0;     // prompt tokens found in the prefix cache (first admission)
  std::vector<int32_t> block_table;
  std::vector<uint64_t> block_hashes;  // chained hash of each full block of `tokens`

  SeqState state = SeqState::kWaiting;
  // Not scheduled while its output is not being read (server backpressure);
  // it keeps its KV blocks unless preempted.
  bool paused = false;
  int num_preemptions = 0;
  std::unordered_map<int32_t, int> output_counts;
  std::vector<int32_t> prompt_ids;   // distinct prompt ids, ascending (filled when a repetition penalty needs them)
  std::vector<SampledToken> output_logprobs;
  std::vector<std::vector<TokenLogprob>> prompt_logprobs;  // one per prompt position (first is empty)
  std::deque<int32_t> forced;        // next tokens to emit instead of sampling (params.forced_*)
  bool forced_after_armed = false;   // params.forced_after is still to be inserted
  bool reasoning_open = false;       // params.reasoning_budget applies: no reasoning end token yet
  // Its full blocks enter the prefix cache. Off for routing replay (its KV
  // comes from forced experts) and for sequences that were running when the
  // cache was flushed (their KV may come from replaced weights).
  bool cacheable = true;
  // params.return_routed_experts: the top-k expert ids of every computed
  // position, [positions, layers, top_k], written as positions are computed
  // (a recomputation after preemption writes the same place again).
  std::vector<int32_t> routed_experts;
  // Constrained decoding (params.constraint): the grammar holds output
  // tokens [constraint_start, ...) (-1: not started yet); constraint_fed of
  // them have been accepted; `mask` [constraint_mask_words] is the next
  // token's, computed by the engine while the step's forward runs.
  std::shared_ptr<ConstraintMatcher> matcher;
  int64_t constraint_start = -1;
  int64_t constraint_fed = 0;
  bool constraint_broken = false;    // a forced token the grammar refused: no longer constrained
  std::vector<uint32_t> mask;

  int64_t num_tokens() const { return static_cast<int64_t>(tokens.size()); }
  int64_t num_output() const { return num_tokens() - num_prompt_tokens; }
  std::span<const int32_t> prompt() const { return {tokens.data(), static_cast<size_t>(num_prompt_tokens)}; }
  std::span<const int32_t> output() const {
    return {tokens.data() + num_prompt_tokens, static_cast<size_t>(num_output())};
  }
  bool finished() const { return state == SeqState::kFinished; }
};

}  // namespace m2
