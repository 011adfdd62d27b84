// Single-sequence helpers over MiniMaxM2 that need no scheduler: full-prompt
// logits and greedy decoding through the KV cache, one token per step.
#pragma once

#include <cstdint>
#include <vector>

#include "model/minimax_m2.h"

namespace m2 {

// Logits [ids.size(), vocab] of every position from one forward pass.
Result<std::vector<float>> all_logits(MiniMaxM2& model, std::span<const int32_t> ids, DType kv_dtype);

struct GreedyOptions {
  int max_tokens = 16;
  std::vector<int32_t> eos_ids;  // stop after emitting one of these (unless ignore_eos)
  bool ignore_eos = false;
  DType kv_dtype = DType::kF32;
  int block_size = 16;
  int prefill_chunk = 0;  // prompt tokens per step; 0 = whole prompt in one step
};

// Greedy continuation of `prompt` (argmax, lowest id on ties).
Result<std::vector<int32_t>> generate_greedy(MiniMaxM2& model, std::span<const int32_t> prompt,
                                             const GreedyOptions& options);

}  // namespace m2
