// Launcher of the sampling kernel (sampling.cu): one token per logit row
// with model/sampling.h's semantics, the row's edits applied in shared
// memory (the logits in device memory are only read).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "model/sampling.h"

namespace m2::cuda {

// One row's parameters as the kernel reads them (built by the backend from a SampleRow).
struct SampleRowArgs {
  double inv_temperature = 0;  // 1 / T (0: greedy)
  uint64_t seed = 0, step = 0;
  float top_p = 1.0f, min_p = 0.0f, repetition_penalty = 1.0f;
  int32_t top_k = 0;           // <= 0 or >= vocab: off
  int32_t logprobs = -1;       // -1: none, else 0..kMaxLogprobs
  int32_t forced = -1;
  int32_t first_edit = 0, num_edits = 0;  // its LogitEdits (ascending ids) in the edit array
  int64_t mask = -1;  // its token mask (SampleRow::allowed: bit i of word i / 32) at this word of the mask array; -1: none
};

// What comes back per row.
struct SampleRowResult {
  int32_t id = -1;
  float logprob = 0.0f;  // raw log-softmax of id (when logprobs >= 0)
  int32_t num_top = 0;
  int32_t top_ids[kMaxLogprobs];
  float top_logprobs[kMaxLogprobs];
};

// The largest vocabulary the kernel takes (each of a cluster's blocks keeps
// its share of a row in shared memory).
int64_t sample_max_vocab();

// logits [rows, vocab] fp32; rows/edits/masks/results device arrays (masks
// may be null when no row has one).
cudaError_t launch_sample(const float* logits, int64_t rows, int64_t vocab, const SampleRowArgs* args,
                          const LogitEdit* edits, const uint32_t* masks, SampleRowResult* results,
                          cudaStream_t stream);

}  // namespace m2::cuda
