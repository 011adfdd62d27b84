// How a tensor- or expert-parallel group splits the model (m2-spec §2.2c,
// docs/design.md "Tensor parallelism"), and each rank's weights.
//
//   attention  q_proj, k_proj, v_proj: row slices (the rank's heads), views;
//              q_norm, k_norm: the matching slices of the full-width weights;
//              o_proj: a column slice (a strided view) -> partial sums, all-reduced.
//              Heads: rank r holds q heads [r·nq/tp, (r+1)·nq/tp) and, while
//              tp <= nkv, kv heads [r·nkv/tp, ...); above nkv ranks each rank
//              holds the one kv head its q heads read (kv head r·nkv/tp),
//              replicated tp/nkv times.
//   MoE        router and bias replicated (every rank routes every token);
//              tensor-parallel: each expert's I columns split, w1/w3 row
//              slices (views), w2 a column slice (strided view); expert-parallel:
//              E/tp whole experts per rank (views), the others empty. Either
//              way the outputs are partial sums, all-reduced.
//   lm_head:   a row slice (the rank's V/tp vocabulary rows, a view); each
//              logit row gathered from all ranks. When tp does not divide V:
//              replicated, and rank 0 alone computes the logits.
//   embedding: the same V/tp rows (a view); a rank looks its ids up, writes
//              zeros for the others', and the rows are all-reduced (one
//              non-zero term an element: the unsharded values). Replicated
//              when tp does not divide V.
//   final norm: replicated (a view).
//
// FP8 weights are 128x128 block-scaled: every slice starts and ends on a
// block boundary (checked, and refused naming the value otherwise), so the
// scales are sliced the same way.
#pragma once

#include <memory>
#include <string>

#include "model/weights.h"
#include "util/status.h"

namespace m2 {

struct ParallelConfig {
  int tensor_parallel_size = 1;  // ranks (vLLM's --tensor-parallel-size)
  bool expert_parallel = false;  // whole experts per rank (vLLM's --enable-expert-parallel)
};

// What rank `rank` of a group holds.
struct RankLayout {
  int q_head_begin = 0, num_q_heads = 0;
  int kv_head_begin = 0, num_kv_heads = 0;
  int64_t inter_begin = 0, inter_size = 0;  // columns of each expert's intermediate (all when expert-parallel)
  int expert_begin = 0, expert_end = 0;     // experts held whole
};

// Whether `config` splits over `parallel`'s ranks: heads, kv heads (or their
// replication), experts or their intermediate columns, FP8 block boundaries.
// The message names the value that does not divide.
Status check_parallel(const ModelConfig& config, const ParallelConfig& parallel);
RankLayout rank_layout(const ModelConfig& config, const ParallelConfig& parallel, int rank);

// The fraction num/den of the elements of checkpoint tensor `name`
// (expected_tensors' names, scales included) that rank `rank` holds:
// 1/1 replicated, 0/1 another rank's expert (for `m2cpp info -tp`).
struct TensorShare {
  int64_t num = 1, den = 1;
};
TensorShare tensor_share(const ModelConfig& config, const ParallelConfig& parallel, int rank, const std::string& name);

// Rank `rank`'s weights: a model of its own whose config has the rank's head
// counts and expert width (num_attention_heads, num_key_value_heads,
// intermediate_size), with views into `full` (which must outlive it): row
// slices contiguous, column slices (o_proj, w2) strided (Linear::row_stride),
// so a rank holds no copy of a weight, only of its column slices' scales.
Result<std::unique_ptr<ModelWeights>> shard_weights(const ModelWeights& full, const ParallelConfig& parallel,
                                                    int rank);

}  // namespace m2
