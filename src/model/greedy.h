// Single-sequence helpers over MiniMaxM2 that need no scheduler: full-prompt
// logits and greedy decoding through the KV cache, one token per step.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "model/minimax_m2.h"

namespace m2 {

// A single sequence owning every block of its own cache, in order (the slot
// of position p is p): the cache and steps of `logits`, `generate` and the
// decode benchmark.
struct SingleSequence {
  std::unique_ptr<KvCache> cache;
  std::vector<int32_t> blocks;

  // A cache for `tokens` positions.
  SingleSequence(MiniMaxM2& model, int64_t tokens, int block_size, DType kv_dtype);
  // The step computing `tokens` at positions [start, start + size): the
  // logits of every row, or of the last one.
  StepInput step(std::span<const int32_t> tokens, int64_t start, bool all_logits) const;
  Status run(std::span<const int32_t> tokens, int64_t start, bool all_logits, MiniMaxM2& model,
             std::vector<float>* logits) {
    return model.forward(step(tokens, start, all_logits), *cache, logits);
  }
};

// Logits [ids.size(), vocab] of every position from one forward pass;
// `routing` forces the first rows' experts ([rows, layers, top_k], at most
// ids.size() rows: GreedyOptions::routing_in's layout).
Result<std::vector<float>> all_logits(MiniMaxM2& model, std::span<const int32_t> ids, DType kv_dtype,
                                      std::span<const int32_t> routing = {});

struct GreedyOptions {
  int max_tokens = 16;
  std::vector<int32_t> eos_ids;  // stop after emitting one of these (unless ignore_eos)
  bool ignore_eos = false;
  DType kv_dtype = DType::kF32;
  int block_size = 16;
  int prefill_chunk = 0;  // prompt tokens per step; 0 = whole prompt in one step
  // Routing capture and replay over the rows stepped (the prompt, then each
  // generated token but the last), laid out [rows, layers, top_k] as the
  // server's routed experts are (docs/rollout.md). routing_out, when set,
  // receives every row's expert ids; routing_in forces its rows' ids (any
  // rows after it are routed freely; a row whose first id is -1 too). With
  // both, the captured ids are the ones used.
  std::vector<int32_t>* routing_out = nullptr;
  std::span<const int32_t> routing_in;
};

// Greedy continuation of `prompt` (argmax, lowest id on ties).
Result<std::vector<int32_t>> generate_greedy(MiniMaxM2& model, std::span<const int32_t> prompt,
                                             const GreedyOptions& options);

}  // namespace m2
