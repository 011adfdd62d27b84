// Launcher of the tensor-core prefill attention (attention_prefill.cu). Plain
// C++, like the launchers: the backend picks, per sequence of a step, this kernel
// or the general one (launch_attention) and launches both when a step mixes
// prefill chunks with decode rows.
#pragma once

#include <cuda_runtime.h>

#include "backend/cuda/attention/attention.h"

namespace m2::cuda {

// Sequences with at least this many rows in the step go to the prefill
// kernel when it supports the cache; fewer rows (decode, speculative
// verification) go to launch_attention, whose items of 8 vectors waste
// nothing on a lone row and which splits long contexts over blocks.
constexpr int kPrefillMinRows = 16;
// (row, q head) vectors per prefill work item: a block of 8 warps x 16.
// Vector v of a sequence is (row v / group, head v % group of the kv head).
constexpr int kPrefillVectors = 128;

// Whether the prefill kernel handles a cache of `dtype` (BF16, F8_E4M3) and
// `head_dim` (128).
bool attention_prefill_supports(DType dtype, int head_dim);

// Causal GQA attention of a.items (each: kPrefillVectors vectors from
// first_vector of one sequence, first_vector a multiple of kPrefillVectors)
// over the paged cache; the fields of AttentionArgs other than splits,
// split_keys and partials as for launch_attention.
cudaError_t launch_attention_prefill(const AttentionArgs& a, cudaStream_t stream);

}  // namespace m2::cuda
