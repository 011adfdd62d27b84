// A sequence's next-token sampling as a Backend::sample row (the math is in
// model/sampling.*, shared by every backend): its parameters, its penalty
// inputs (min_tokens banning of EOS and stop ids, logit_bias, the prompt's
// distinct ids and the generated ids' counts) and its random stream (the
// request seed + completion index, and the output position).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "engine/sequence.h"
#include "model/sampling.h"

namespace m2 {

// What a row's spans point into; must outlive the sampling call.
struct SampleRowInputs {
  std::vector<int32_t> banned;
  std::vector<LogitBias> bias;
  std::vector<TokenCount> counts;
};

// The row that samples `seq`'s next token (or emits its next forced token).
// Computes `seq.prompt_ids` on first use by a repetition penalty.
SampleRow make_sample_row(Sequence& seq, std::span<const int32_t> eos_ids, SampleRowInputs* inputs);

}  // namespace m2
