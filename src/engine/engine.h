// The engine: requests in, tokens and text out, one model step at a time.
// Owns the paged KV cache, the block manager with its prefix cache, and the
// scheduler; builds each step's batch (prefill chunks and decodes of many
// sequences), runs the model, samples, detokenizes and checks stop
// conditions. Single-threaded: the server drives step() from one thread.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/block_manager.h"
#include "engine/scheduler.h"
#include "engine/sequence.h"
#include "engine/stop_strings.h"
#include "model/minimax_m2.h"
#include "text/tokenizer/incremental_detokenizer.h"
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
};

struct RequestOutput {
  std::string request_id;
  int index = 0;                          // which of the request's n completions
  std::vector<int32_t> new_token_ids;
  std::string new_text;                   // empty without a tokenizer
  std::vector<SampledToken> new_logprobs; // when params.logprobs >= 0
  std::vector<std::vector<TokenLogprob>> prompt_logprobs;  // once, with the first output
  bool finished = false;
  FinishReason finish_reason = FinishReason::kNone;
  std::string stop_string;                // the stop string that ended it (excluded from the text)
  int32_t stop_token_id = -1;             // the stop_token_ids entry that ended it
  int64_t num_prompt_tokens = 0;
  int64_t num_cached_tokens = 0;
  int64_t num_output_tokens = 0;
};

struct EngineStats {
  int64_t steps = 0;
  int64_t prefill_tokens = 0;   // prompt (and recomputed) tokens run through the model
  int64_t decode_tokens = 0;
  int64_t preemptions = 0;
  size_t running = 0, waiting = 0;
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

  // Runs one model step; returns what each touched sequence produced.
  Result<std::vector<RequestOutput>> step();
  bool has_unfinished() const { return !seqs_.empty(); }

  EngineStats stats() const;
  int64_t max_model_len() const { return max_model_len_; }
  const text::Tokenizer* tokenizer() const { return tokenizer_; }

 private:
  struct SeqText {
    std::unique_ptr<text::IncrementalDetokenizer> detok;
    std::unique_ptr<StopStringMatcher> stops;
  };

  Engine(MiniMaxM2& model, const text::Tokenizer* tokenizer, const EngineConfig& config, int64_t num_blocks);
  void append_token(Sequence& seq, const SampledToken& tok, RequestOutput& out);
  // A stop string cut the text before it: the detokenizer's held bytes are
  // dropped rather than flushed.
  void finish(Sequence& seq, FinishReason reason, RequestOutput& out, std::string stop_string = {},
              int32_t stop_token_id = -1);

  MiniMaxM2& model_;
  const text::Tokenizer* tokenizer_;
  EngineConfig config_;
  int64_t max_model_len_;
  std::vector<int32_t> eos_ids_;
  std::unique_ptr<KvCache> cache_;
  BlockManager blocks_;
  Scheduler scheduler_;
  int64_t next_seq_id_ = 0;
  int64_t next_arrival_ = 0;
  std::map<int64_t, std::unique_ptr<Sequence>> seqs_;       // live sequences
  std::map<int64_t, SeqText> texts_;
  std::map<std::string, std::vector<int64_t>> requests_;     // request id -> its sequences
  std::map<int64_t, std::vector<int64_t>> pending_siblings_; // first child -> siblings admitted after its prefill
  std::vector<float> logits_;
  EngineStats stats_;
};

const char* finish_reason_name(FinishReason r);

}  // namespace m2
