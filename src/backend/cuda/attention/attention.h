// Launchers of the paged attention kernels: general, decode (SIMT and tensor cores).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "backend/cuda/runtime/device_types.h"

namespace m2::cuda {

// ---- attention.cu -------------------------------------------------------------
// One sequence of the step, as the attention kernel reads it.
struct AttnSeq {
  int32_t first_row = 0;
  int32_t num_rows = 0;
  int32_t context_len = 0;
  int32_t table_offset = 0;  // of its block table in AttentionArgs::block_tables
};
// A unit of work: up to 8 consecutive (row, q head) vectors of one sequence
// that share a kv head.
struct AttnItem {
  int32_t seq = 0;
  int32_t first_vector = 0;  // vector v = row_in_seq * group + head_in_group
};
struct AttentionArgs {
  const float* q = nullptr;  // [T, heads * head_dim]
  float* out = nullptr;      // [T, heads * head_dim]
  int64_t T = 0;
  const void* k_cache = nullptr;  // [blocks, block_size, kv_heads, head_dim]
  const void* v_cache = nullptr;
  const float* k_scales = nullptr;  // F8_E4M3: [blocks, block_size, kv_heads]; x = code * scale
  const float* v_scales = nullptr;
  DType dtype = DType::kBF16;  // F32, BF16 or F8_E4M3
  int block_size = 0, kv_heads = 0, head_dim = 0, group = 0;
  float scale = 0;
  const AttnSeq* seqs = nullptr;
  const AttnItem* items = nullptr;
  int64_t num_items = 0;
  const int32_t* block_tables = nullptr;
  // Split of each item's keys over `splits` blocks of `split_keys` keys (the
  // decode kernels: of each sequence's keys over `splits` blocks, in whole
  // tiles; split_keys unused); with
  // more than one, partial results go to `partials` (attention_partial_floats)
  // and a second kernel merges them (the decode kernel: the last block of an
  // item merges, counting finished splits in `counters`, one per item and kv
  // head, zero between launches).
  int splits = 1;
  int split_keys = 0;
  float* partials = nullptr;
  unsigned* counters = nullptr;
  // The prefill kernel only, when it writes every row of out: out's FP8
  // copy (one 128-channel group = one head of head_dim 128).
  Fp8Out out8;
};
constexpr int kAttnVectors = 8;  // (row, head) vectors per item
constexpr int kAttnMaxHeadDim = 128;
// Partials of `items` work items x kv heads x kAttnVectors vectors.
size_t attention_partial_floats(int64_t items, int kv_heads, int head_dim, int splits);
cudaError_t launch_attention(const AttentionArgs& a, cudaStream_t stream);

// ---- attention_decode.cu --------------------------------------------------------
// Decode rows (sequences of num_rows 1): block x takes seqs[x] (num_items of
// them; `items` is not read: one load less in the kernel's chain of
// dependent loads), head_dim 128, group <= 8, BF16 or FP8 caches; each
// sequence's keys divided among `splits` blocks in tiles of kDecodeTileKeys
// (split_key_range; split_keys is not read).
constexpr int kDecodeHeadDim = 128;
constexpr int kDecodeMaxGroup = 8;
constexpr int kDecodeTileKeys = 64;
bool attention_decode_supports(DType dtype, int head_dim, int group);
size_t attention_decode_partial_floats(int64_t seqs, int kv_heads, int splits);
cudaError_t launch_attention_decode(const AttentionArgs& a, cudaStream_t stream);

// ---- attention_decode_mma.cu ----------------------------------------------------
// Decode rows on tensor cores (bf16 Q and P, fp32 softmax and sums): BF16
// and FP8 caches, head_dim 128, group <= 8, keys split as the SIMT kernel's
// (same records and merge, attention_split_merge.cuh).
bool attention_decode_mma_supports(DType dtype, int head_dim, int group);
cudaError_t launch_attention_decode_mma(const AttentionArgs& a, cudaStream_t stream);
// Decode steps whose keys are split run on tensor cores from splits of this
// many keys (long contexts: a pipeline of tiles per block; one or two tiles a
// block are the SIMT kernel's, whose 8 warps shorten the chain of a batch-1
// step at short contexts); without a split, always (attention_plan.h).
constexpr int kDecodeMmaMinSplitKeys = 256;

}  // namespace m2::cuda
