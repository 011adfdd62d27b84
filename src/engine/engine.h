// The engine: requests in, tokens and text out, one model step at a time.
// Owns the paged KV cache, the block manager with its prefix cache, the
// scheduler and the output processor. A step is three parts: building it
// (the scheduler's decision as the model's arrays, step_batch.h), running it
// (the forward pass and sampling, on the backend where the logits are) and
// processing its outputs (output_processor.h: tokens appended, detokenized,
// stop conditions). Single-threaded: the server drives step() from one thread.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/block_manager.h"
#include "engine/output_processor.h"
#include "engine/scheduler.h"
#include "engine/sequence.h"
#include "engine/step_batch.h"
#include "model/minimax_m2.h"
#include "text/tokenizer/tokenizer.h"

namespace m2 {

struct EngineConfig {
  int block_size = 16;
  int64_t num_blocks = 0;          // KV blocks; 0: from kv_cache_bytes
  int64_t kv_cache_bytes = 0;      // 0: 256 MiB worth of blocks (CPU default)
  DType kv_dtype = DType::kBF16;
  bool prefix_cache = true;
  int64_t max_model_len = 0;       // 0: the model's max_position_embeddings, capped by the pool
  SchedulerConfig scheduler;
  std::vector<int32_t> eos_ids;    // used when there is no tokenizer
  // Record the decode graphs of every batch size before the first step
  // (MiniMaxM2::record_decode_graphs; a server's start-up).
  bool record_decode_graphs = false;
};

struct EngineStats {
  int64_t steps = 0;
  int64_t prefill_tokens = 0;   // prompt (and recomputed) tokens run through the model
  int64_t decode_tokens = 0;
  int64_t preemptions = 0;
  size_t running = 0, waiting = 0;
  size_t paused = 0;            // of those, paused (their clients are not reading)
  int64_t kv_blocks_used = 0, kv_blocks_total = 0;
  PrefixCacheStats prefix;
};

class Engine {
 public:
  static Result<std::unique_ptr<Engine>> create(MiniMaxM2& model, const text::Tokenizer* tokenizer,
                                                const EngineConfig& config);

  // Queues a request; fails (nothing queued) on invalid params, an empty or
  // too long prompt, or a duplicate id.
  Status add_request(const std::string& request_id, std::vector<int32_t> prompt, const SamplingParams& params,
                     int priority = 0);
  // Cancels a request: its blocks are freed at once; it produces no output.
  void abort(const std::string& request_id);
  // Pauses (or resumes) every sequence of a request: a paused one is not
  // scheduled and keeps its blocks. Unknown ids are ignored.
  void set_paused(const std::string& request_id, bool paused);

  // ---- Rollout control (docs/rollout.md); engine thread only, between steps.
  // Ends every sequence of a request now, as finished with reason abort (the
  // tokens so far were already returned), and frees its blocks: one output
  // per unfinished completion.
  std::vector<RequestOutput> abort_with_outputs(const std::string& request_id);
  // Forgets the prefix cache; the running sequences' later blocks are not
  // cached either (their KV may predate the flush). Returns blocks forgotten.
  int64_t flush_prefix_cache();
  // Preempts every running sequence (they recompute when scheduled again).
  size_t retract_all() { return scheduler_.retract_all(); }
  // Serves `weights` (same config) from the next step on: the backend's
  // prepare_weights, the model's weight set, and a prefix-cache flush (cached
  // KV belongs to the old weights). On failure the old weights stay.
  Status swap_weights(ModelWeights& weights);
  const MiniMaxM2& model() const { return model_; }

  // Runs one model step; returns what each touched sequence produced.
  Result<std::vector<RequestOutput>> step();
  bool has_unfinished() const { return !seqs_.empty(); }
  // A step would do something: some sequence that is not paused is unfinished.
  bool has_runnable() const { return scheduler_.has_work(); }

  EngineStats stats() const;
  int64_t max_model_len() const { return max_model_len_; }
  const text::Tokenizer* tokenizer() const { return tokenizer_; }

 private:
  Engine(MiniMaxM2& model, const text::Tokenizer* tokenizer, const EngineConfig& config, int64_t num_blocks,
         int64_t max_model_len);
  // Runs the batch: the forward pass, and sampling where the logits are
  // (on the backend; on the host when the batch wants full logits).
  Result<StepResult> run(StepBatch& batch);
  // The core's side of a step that ran: token counts, computed positions,
  // full blocks into the prefix cache, n > 1 siblings admitted once the
  // first one's prompt is cached.
  void advance(const StepBatch& batch);
  // Routing replay and capture: the forced expert ids of the batch's rows
  // (StepInput::forced_experts), and the captured ids into the sequences.
  void add_routing(StepBatch& batch) const;
  void store_routing(const StepBatch& batch);
  void attach_routed_experts(std::vector<RequestOutput>& outputs) const;
  // Frees the sequences that finished this step (their blocks return to the pool).
  void release_finished(const std::vector<RequestOutput>& outputs);

  MiniMaxM2& model_;
  const text::Tokenizer* tokenizer_;
  EngineConfig config_;
  int64_t max_model_len_;
  std::unique_ptr<KvCache> cache_;
  BlockManager blocks_;
  Scheduler scheduler_;
  OutputProcessor output_;
  int64_t next_seq_id_ = 0;
  int64_t next_arrival_ = 0;
  std::map<int64_t, std::unique_ptr<Sequence>> seqs_;       // live sequences
  std::map<std::string, std::vector<int64_t>> requests_;     // request id -> its sequences
  std::map<int64_t, std::vector<int64_t>> pending_siblings_; // first child -> siblings admitted after its prefill
  std::vector<float> logits_;  // [logit rows, vocab] of the last step that wanted full logits
  EngineStats stats_;
};

}  // namespace m2
