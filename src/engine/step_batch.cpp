#include "engine/step_batch.h"

namespace m2 {

StepBatch build_step_batch(const SchedulerOutput& so, const BlockManager& blocks, std::span<const int32_t> eos_ids) {
  StepBatch b;
  b.chunks.reserve(so.chunks.size());
  int64_t row = 0;
  for (const ScheduledChunk& sc : so.chunks) {
    Sequence& seq = *sc.seq;
    StepChunk c{&seq, seq.num_computed, sc.num_tokens};
    const int64_t n = c.num_tokens, start = c.start;
    for (int64_t i = 0; i < n; ++i) {
      b.input.tokens.push_back(seq.tokens[start + i]);
      b.input.positions.push_back(static_cast<int32_t>(start + i));
      b.input.slots.push_back(blocks.slot(seq, start + i));
    }
    b.input.seqs.push_back({row, n, start + n, seq.block_table});
    // Only a chunk that reaches the end of the known tokens samples; a chunk
    // of a prompt-logprobs request keeps the logits of every row.
    const bool completes = start + n == seq.num_tokens();
    c.prompt_logprobs = seq.params.prompt_logprobs >= 0 && start < seq.num_prompt_tokens;
    c.first_logit = static_cast<int64_t>(b.input.logit_rows.size());
    if (c.prompt_logprobs) {
      for (int64_t i = 0; i < n; ++i) b.input.logit_rows.push_back(row + i);
      c.num_logits = n;
      b.full_logits = true;
    } else if (completes) {
      b.input.logit_rows.push_back(row + n - 1);
      c.num_logits = 1;
    }
    if (completes) {
      c.sample = static_cast<int>(b.sample_chunk.size());
      b.sample_chunk.push_back(b.chunks.size());
    }
    b.chunks.push_back(c);
    row += n;
  }
  // Sized before any row is made: the rows' spans point into these inputs.
  b.sample_inputs.resize(b.sample_chunk.size());
  b.sample_rows.resize(b.sample_chunk.size());
  for (size_t i = 0; i < b.sample_chunk.size(); ++i)
    b.sample_rows[i] = make_sample_row(*b.chunks[b.sample_chunk[i]].seq, eos_ids, &b.sample_inputs[i]);
  return b;
}

}  // namespace m2
