// Step building: one scheduler decision turned into the arrays a model step
// takes (token ids, positions, KV slots, per-sequence slices, the rows whose
// logits are wanted) and the sampling row of every sequence that reaches the
// end of its known tokens. The engine runs the batch and hands it, with what
// the run returned, to the output processor.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "engine/block_manager.h"
#include "engine/sampler.h"
#include "engine/scheduler.h"
#include "model/minimax_m2.h"

namespace m2 {

// One scheduled chunk as the step computes it.
struct StepChunk {
  Sequence* seq = nullptr;
  int64_t start = 0;         // its first position: seq->num_computed when the step was built
  int64_t num_tokens = 0;    // positions [start, start + num_tokens) run this step
  int64_t first_logit = -1;  // its first row among the step's logit rows
  int64_t num_logits = 0;    // num_tokens (prompt_logprobs), 1 (it samples) or 0
  bool prompt_logprobs = false;  // its rows' logits give its prompt logprobs
  int sample = -1;           // its index among the sample rows; -1: it does not sample
};

struct StepBatch {
  // Not copyable: a copy's sample rows would point into this one's inputs.
  StepBatch() = default;
  StepBatch(StepBatch&&) = default;
  StepBatch& operator=(StepBatch&&) = default;
  StepBatch(const StepBatch&) = delete;
  StepBatch& operator=(const StepBatch&) = delete;

  StepInput input;                 // rows in chunk order, chunk after chunk
  std::vector<StepChunk> chunks;   // the scheduler's order
  // One per sampling chunk, in chunk order; a row samples that chunk's last
  // logit row. The rows' spans point into sample_inputs and the sequences.
  std::vector<SampleRow> sample_rows;
  std::vector<SampleRowInputs> sample_inputs;
  std::vector<size_t> sample_chunk;  // chunk index of each sample row
  // A chunk wants prompt logprobs: the step's logits [logit rows, vocab]
  // come to the host and sampling runs there.
  bool full_logits = false;

  // The logit row sample row `i` draws from.
  int64_t sample_logit_row(size_t i) const {
    const StepChunk& c = chunks[sample_chunk[i]];
    return c.first_logit + c.num_logits - 1;
  }
};

// What running a batch gave back.
struct StepResult {
  std::vector<SampledToken> sampled;  // one per sample row
  // [input.logit_rows.size(), vocab] fp32 when the batch wanted full logits,
  // else empty. The rows that were sampled from hold their edited logits
  // (sample_row edits in place); none of them is a prompt-logprob row.
  std::span<const float> logits;
  int64_t vocab = 0;
};

// Builds the step for `so` (its chunks must be non-empty). `eos_ids` are
// banned below a sequence's min_tokens. make_sample_row may fill a
// sequence's prompt_ids; nothing else in the sequences changes.
StepBatch build_step_batch(const SchedulerOutput& so, const BlockManager& blocks, std::span<const int32_t> eos_ids);

}  // namespace m2
