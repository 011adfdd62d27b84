// Which kernels run a step's paged attention: the one place the choice is
// made (the attention op and `m2cpp info --plan` call these), pure functions
// of the step's sequences, the cache, the options and the device.
//
// Each sequence of a step goes to one kernel by its rows (attention_path):
//   prefill   >= 16 rows, tensor cores on (tc_attention), a BF16/FP8 cache of
//             head_dim 128: FlashInfer's Hopper kernel (attn_prefill=flashinfer,
//             a FlashInfer build, sm_90; not inside a graph capture) or our
//             mma.sync kernel (attention_prefill.cu)
//   decode    1 row, group <= 8, head_dim 128: tensor cores (decode_mma) where
//             the keys need no split or splits of >= 256 keys, else decode_simt
//             (attention_decode.cu); keys split to fill the GPU (attention_splits)
//   general   anything else: the SIMT kernel (attention.cu), keys split likewise
//
// batch_invariant: every row, decode rows too, on one kernel whatever the
// step: the prefill kernel where it takes the cache (tc_attention, BF16/FP8,
// head_dim 128; never FlashInfer), else the general kernel with its keys
// split at fixed positions (multiples of kInvariantSplitKeys). A row's result
// then depends on its own query and keys only: tiles and splits past its keys,
// and the rows sharing its work item, add exact zeros (attention_prefill.cu,
// attention.cu). The prefill kernel has no key split: a long-context batch of
// few rows runs on 8 blocks per sequence (docs/perf.md).
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "backend/cuda/runtime/cuda_options.h"
#include "tensor/dtype.h"

namespace m2::cuda {

struct DeviceCaps;  // runtime/device_caps.h

// How the keys of a launch's (sequence, kv head) blocks are split.
struct AttentionSplits {
  int splits = 1;
  int split_keys = 0;  // keys per split, a multiple of the kernel's granule
};
// Splits of `max_keys` keys over `blocks` (sequence, kv head) blocks: about
// two blocks per SM when the blocks alone would leave the GPU idle.
AttentionSplits attention_splits(int64_t blocks, int64_t max_keys, int num_sms, int granule);
// The decode kernels' splits in a step that may be recorded (a CUDA graph
// replayed whatever its sequences' contexts): as many as fill the GPU, not
// fewer for short contexts, so that the count depends on the blocks only;
// the kernels divide each sequence's own keys among them in whole tiles
// (split_key_range, attention_split_merge.cuh). split_keys: the longest
// sequence's share (`max_keys`), for the choice of kernel.
AttentionSplits attention_splits_recorded(int64_t blocks, int64_t max_keys, int num_sms, int granule);

// Batch invariance: splits of kInvariantSplitKeys keys (a multiple of the
// general kernel's 128-key round), as many as `max_keys` needs; work items
// launched in groups whose split partials fit kInvariantPartialBytes.
constexpr int kInvariantSplitKeys = 512;
constexpr size_t kInvariantPartialBytes = size_t{256} << 20;
AttentionSplits attention_splits_invariant(int64_t max_keys);
// Items of one general-kernel launch under that budget (at least 1).
int64_t attention_invariant_items_per_launch(int kv_heads, int head_dim, int splits);

// Whether prefill chunks over a cache of `dtype` and `head_dim` may take the
// tensor-core prefill kernel (tc_attention on, a cache it supports).
bool attention_prefill_on(const CudaOptions& o, DType dtype, int head_dim);

enum class AttnPath { kPrefill, kDecode, kGeneral };
// The kernel family of a sequence of `rows` rows in a step where the prefill
// and decode kernels take the cache (prefill_ok, decode_ok); `invariant`:
// one family for every row count (the prefill kernel if prefill_ok, else the
// general one).
AttnPath attention_path(int64_t rows, bool prefill_ok, bool decode_ok, bool invariant = false);
// Whether a split decode step (or one without a split) runs on tensor cores.
bool attention_decode_on_mma(DType dtype, int head_dim, int group, const AttentionSplits& sp, SplitDecode mode);

// A step's attention as `m2cpp info --plan` prints it.
struct AttentionStepShape {
  std::span<const int64_t> rows;      // per sequence
  std::span<const int64_t> contexts;  // per sequence: keys it attends to (its cached tokens + its rows)
  DType cache_dtype = DType::kF8E4M3;
  int head_dim = 128, heads = 48, kv_heads = 8;
};
std::string describe_attention_plan(const AttentionStepShape& s, const CudaOptions& o, const DeviceCaps& caps);

}  // namespace m2::cuda
