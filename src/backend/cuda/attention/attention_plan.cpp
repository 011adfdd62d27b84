#include "backend/cuda/attention/attention_plan.h"

#include <fmt/format.h>

#include "backend/cuda/runtime/device_caps.h"

#include <algorithm>

#include "backend/cuda/attention/attention.h"
#include "backend/cuda/attention/attention_prefill.h"
#include "backend/cuda/attention/flashinfer_prefill.h"

namespace m2::cuda {

AttentionSplits attention_splits(int64_t blocks, int64_t max_keys, int num_sms, int granule) {
  int64_t splits = 1;
  if (blocks < 2 * num_sms)
    splits = std::clamp<int64_t>((2 * num_sms + blocks - 1) / blocks, 1, (max_keys + granule - 1) / granule);
  const int64_t per = (max_keys + splits - 1) / splits;
  AttentionSplits sp;
  sp.split_keys = static_cast<int>(std::max<int64_t>(1, (per + granule - 1) / granule) * granule);
  sp.splits = static_cast<int>(std::max<int64_t>(1, (max_keys + sp.split_keys - 1) / sp.split_keys));
  return sp;
}

AttentionSplits attention_splits_recorded(int64_t blocks, int64_t max_keys, int num_sms, int granule) {
  AttentionSplits sp;
  sp.splits = blocks < 2 * num_sms ? static_cast<int>((2 * num_sms + blocks - 1) / std::max<int64_t>(blocks, 1)) : 1;
  const int64_t per = (std::max<int64_t>(max_keys, 1) + sp.splits - 1) / sp.splits;
  sp.split_keys = static_cast<int>((per + granule - 1) / granule * granule);
  return sp;
}

AttentionSplits attention_splits_invariant(int64_t max_keys) {
  AttentionSplits sp;
  sp.split_keys = kInvariantSplitKeys;
  sp.splits = static_cast<int>(std::max<int64_t>(1, (max_keys + kInvariantSplitKeys - 1) / kInvariantSplitKeys));
  return sp;
}

int64_t attention_invariant_items_per_launch(int kv_heads, int head_dim, int splits) {
  const size_t per_item = sizeof(float) * attention_partial_floats(1, kv_heads, head_dim, splits);
  return std::max<int64_t>(1, static_cast<int64_t>(kInvariantPartialBytes / per_item));
}

bool attention_prefill_on(const CudaOptions& o, DType dtype, int head_dim) {
  return o.tc_attention && attention_prefill_supports(dtype, head_dim);
}

AttnPath attention_path(int64_t rows, bool prefill_ok, bool decode_ok, bool invariant) {
  if (invariant) return prefill_ok ? AttnPath::kPrefill : AttnPath::kGeneral;
  if (prefill_ok && rows >= kPrefillMinRows) return AttnPath::kPrefill;
  if (decode_ok && rows == 1) return AttnPath::kDecode;
  return AttnPath::kGeneral;
}

bool attention_decode_on_mma(DType dtype, int head_dim, int group, const AttentionSplits& sp, SplitDecode mode) {
  if (!attention_decode_mma_supports(dtype, head_dim, group)) return false;
  if (sp.splits == 1) return true;
  return mode == SplitDecode::kMma || (mode == SplitDecode::kAuto && sp.split_keys >= kDecodeMmaMinSplitKeys);
}

std::string describe_attention_plan(const AttentionStepShape& s, const CudaOptions& o, const DeviceCaps& caps) {
  const int G = s.heads / s.kv_heads;
  const bool prefill_ok = attention_prefill_on(o, s.cache_dtype, s.head_dim);
  const bool decode_ok = attention_decode_supports(s.cache_dtype, s.head_dim, G);
  int64_t n[3] = {0, 0, 0}, keys[3] = {0, 0, 0}, items = 0;
  for (size_t i = 0; i < s.rows.size(); ++i) {
    const int p = static_cast<int>(attention_path(s.rows[i], prefill_ok, decode_ok, o.batch_invariant));
    ++n[p];
    keys[p] = std::max(keys[p], s.contexts[i]);
    if (p == static_cast<int>(AttnPath::kGeneral)) items += (s.rows[i] * G + kAttnVectors - 1) / kAttnVectors;
  }
  std::string out;
  auto add = [&](const std::string& part) { out += (out.empty() ? "" : "; ") + part; };
  if (n[0]) {
    const bool fi = o.flashinfer_prefill && !o.batch_invariant && caps.flashinfer_prefill && s.head_dim == kFlashInferHeadDim &&
                    (s.cache_dtype == DType::kBF16 || s.cache_dtype == DType::kF8E4M3);
    add(fmt::format("{} prefill seq{} on {}{}", n[0], n[0] == 1 ? "" : "s",
                    fi ? (s.cache_dtype == DType::kF8E4M3 ? "flashinfer (FP8 pages copied to bf16)" : "flashinfer")
                       : "prefill_mma",
                    o.batch_invariant ? " (every row count: batch-invariant)" : ""));
  }
  if (n[1]) {
    const AttentionSplits sp = attention_splits(n[1] * s.kv_heads, keys[1], caps.num_sms, kDecodeTileKeys);
    const bool mma = o.tc_attention && attention_decode_on_mma(s.cache_dtype, s.head_dim, G, sp, o.split_decode);
    add(fmt::format("{} decode row{} on {} ({} split{} of {} keys)", n[1], n[1] == 1 ? "" : "s",
                    mma ? "decode_mma" : "decode_simt", sp.splits, sp.splits == 1 ? "" : "s", sp.split_keys));
  }
  if (n[2]) {
    const AttentionSplits sp = o.batch_invariant ? attention_splits_invariant(keys[2])
                                                 : attention_splits(items * s.kv_heads, keys[2], caps.num_sms, 128);
    add(fmt::format("{} seq{} on attention_simt ({} split{}{})", n[2], n[2] == 1 ? "" : "s", sp.splits,
                    sp.splits == 1 ? "" : "s",
                    o.batch_invariant ? fmt::format(" of {} keys at fixed positions", sp.split_keys) : ""));
  }
  return out;
}

}  // namespace m2::cuda
