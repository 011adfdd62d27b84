// Continuous batching with chunked prefill (nano-vllm's shape, vLLM's
// semantics). Every step gets a token budget; running sequences go first, in
// (priority, arrival) order (a decode costs 1 token, an unfinished prefill
// continues with as many of its known tokens as the budget left holds), then
// waiting ones in the same order, each starting after its cached prefix
// (none for prompt logprobs), FCFS: the first waiting sequence that does not
// fit the pool stops admission for the step, and so does max_num_seqs.
// When the KV pool runs dry the lowest-priority, latest-arrived running
// sequence is preempted (possibly the one asking): its blocks are released
// and it is recomputed later from its tokens (same tokens out: sampling state
// lives in the sequence); a step that preempted admits nobody. A sequence
// that fits the context is never dropped. A paused sequence is passed over
// (running or waiting: it does not hold up the queue) until it is resumed;
// when blocks run out, paused running sequences are preempted first (the
// latest first), also to admit a waiting sequence that would not fit.
#pragma once

#include <algorithm>

#include <cstdint>
#include <deque>
#include <vector>

#include "engine/block_manager.h"

namespace m2 {

struct SchedulerConfig {
  int max_num_seqs = 64;                  // running sequences at once
  int64_t max_num_batched_tokens = 512;   // tokens per step (prefill chunks + decodes)
  // Logit rows per step of prompt-logprobs chunks (every row of theirs keeps
  // its logits); the step's other chunks take one row each at most. Bounds
  // the logits a step holds: max_logit_rows().
  int64_t max_prompt_logprob_rows = 256;
  int64_t max_logit_rows() const {
    return std::min<int64_t>(max_num_batched_tokens, max_num_seqs + max_prompt_logprob_rows);
  }
};

struct ScheduledChunk {
  Sequence* seq;
  int64_t num_tokens;  // tokens computed this step, from seq->num_computed
};

struct SchedulerOutput {
  std::vector<ScheduledChunk> chunks;
  std::vector<Sequence*> preempted;
  int64_t num_tokens = 0;
};

class Scheduler {
 public:
  Scheduler(const SchedulerConfig& config, BlockManager& blocks) : config_(config), blocks_(blocks) {}

  void add(Sequence* seq);
  // Removes a sequence wherever it is and frees its blocks at once.
  void remove(Sequence* seq);
  SchedulerOutput schedule();
  // Preempts every running sequence (their blocks freed; they recompute when
  // scheduled again): SGLang's pause_generation mode "retract". Returns how many.
  size_t retract_all();

  // Some sequence that is not paused is running or waiting.
  bool has_work() const;
  size_t num_running() const { return running_.size(); }
  size_t num_paused() const;
  size_t num_waiting() const { return waiting_.size(); }

 private:
  int64_t chunk_tokens(const Sequence& seq, int64_t budget, int64_t* logit_rows_left) const;
  void preempt(Sequence* seq);
  Sequence* latest_paused() const;  // the last paused running sequence, or null
  void insert_waiting(Sequence* seq);

  SchedulerConfig config_;
  BlockManager& blocks_;
  std::vector<Sequence*> running_;  // (priority, arrival) order
  std::deque<Sequence*> waiting_;   // (priority, arrival) order
};

}  // namespace m2
