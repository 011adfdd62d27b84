#include "backend/cuda/runtime/scratch_plan.h"

#include <fmt/format.h>

#include <algorithm>
#include <bit>

#include "backend/cuda/attention/attention.h"
#include "backend/cuda/attention/attention_plan.h"
#include "backend/cuda/attention/attention_prefill.h"
#include "backend/cuda/attention/flashinfer_prefill.h"
#include "backend/cuda/gemm/fp8_gemm.h"
#include "backend/cuda/gemm/matmul_plan.h"
#include "backend/cuda/moe/moe.h"
#include "backend/cuda/moe/moe_plan.h"
#include "backend/cuda/moe/route.h"
#include "backend/cuda/runtime/device_buffer.h"
#include "backend/cuda/runtime/device_caps.h"
#include "backend/cuda/sampling/sampling.h"

namespace m2::cuda {
namespace {
int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
}  // namespace

ScratchPlan plan_scratch(const ModelConfig& c, const StepLimits& l, const CudaOptions& o, const DeviceCaps& caps) {
  ScratchPlan p;
  const int64_t T = l.max_tokens, S = std::min(l.max_seqs, T), R = std::min(l.max_logit_rows, T);
  const int64_t H = c.hidden_size, E = c.num_local_experts;
  const int kvh = l.cache.num_kv_heads, hd = l.cache.head_dim, G = kvh > 0 ? c.num_attention_heads / kvh : 1;
  const DType lin = c.fp8 ? DType::kF8E4M3 : c.dtype;

  // Router and MoE: their plans change kernel with the step's tokens, so
  // every token count up to the limit is asked (pure arithmetic, ~µs each).
  p.route_logits = sizeof(float) * static_cast<size_t>(T * E);
  p.route_counters = sizeof(unsigned) * static_cast<size_t>(route_counter_count(T));
  p.moe_local_routing = (sizeof(int32_t) + sizeof(float)) * static_cast<size_t>(T * c.num_experts_per_tok);
  for (int64_t t = 1; t <= T; ++t) {
    const MoePlan m = plan_moe({t, c.num_experts_per_tok, H, c.intermediate_size, E, lin}, o, caps);
    p.moe = std::max(p.moe, m.scratch_bytes);
    if (m.kernel == MoeKernel::kDecodeWgmma)
      p.moe_counters = std::max(p.moe_counters, sizeof(unsigned) * static_cast<size_t>(moe_decode_counter_count(t, H)));
  }

  // Attention. Keys: a recorded decode step's context bound (the power of two
  // at or above the context) may exceed max_context, and its decode splits
  // do not shrink for short contexts (attention_splits_recorded), so that
  // many are planned. Splits appear only while the blocks do not fill the GPU
  // twice (attention_splits), so only that many items are asked.
  const int64_t keys = static_cast<int64_t>(std::bit_ceil(static_cast<uint64_t>(std::max<int64_t>(l.max_context, 256))));
  const int64_t few = kvh > 0 ? ceil_div(2 * caps.num_sms, kvh) : 0;
  for (int64_t n = 1; n <= std::min(S, few); ++n) {
    const AttentionSplits d = attention_splits_recorded(n * kvh, keys, caps.num_sms, kDecodeTileKeys);
    if (d.splits > 1) {  // (at least attention_splits' count)
      p.attn_decode_partials =
          std::max(p.attn_decode_partials, sizeof(float) * attention_decode_partial_floats(n, kvh, d.splits));
      p.attn_counters = std::max(p.attn_counters, sizeof(unsigned) * static_cast<size_t>(n * kvh));
    }
  }
  for (int64_t n = 1; n <= std::min(ceil_div(T * G, kAttnVectors), few); ++n) {
    const AttentionSplits g = attention_splits(n * kvh, keys, caps.num_sms, 128);
    if (g.splits > 1)
      p.attn_partials = std::max(p.attn_partials, sizeof(float) * attention_partial_floats(n, kvh, hd, g.splits));
  }
  if (o.batch_invariant && kvh > 0 && !attention_prefill_on(o, l.cache.dtype, hd)) {
    // every row on the general kernel, splits at fixed positions
    const AttentionSplits g = attention_splits_invariant(keys);
    const int64_t items = std::min(ceil_div(T * G, kAttnVectors) + S, attention_invariant_items_per_launch(kvh, hd, g.splits));
    if (g.splits > 1)
      p.attn_partials = std::max(p.attn_partials, sizeof(float) * attention_partial_floats(items, kvh, hd, g.splits));
  }
  // The work list (upload_attention_meta): sequences, general items (8
  // vectors), prefill items (kPrefillVectors), decode sequences, then the
  // block tables, each section 16-byte aligned.
  const int64_t table = ceil_div(keys, std::max(l.cache.block_size, 1));
  p.attn_meta = sizeof(AttnSeq) * 2 * S + sizeof(AttnItem) * (ceil_div(T * G, kAttnVectors) + S) +
                sizeof(AttnItem) * (ceil_div(T * G, kPrefillVectors) + S) + sizeof(int32_t) * S * table + 128;

  // FlashInfer's prefill (sequences of >= kPrefillMinRows rows). Its FP8
  // pages are copied once each (backend_flashinfer.cpp), so the copies are
  // bounded by the cache's blocks.
  const bool flashinfer = o.tc_attention && o.flashinfer_prefill && caps.flashinfer_prefill &&
                          hd == kFlashInferHeadDim &&
                          (l.cache.dtype == DType::kBF16 || l.cache.dtype == DType::kF8E4M3);
  if (flashinfer) {
    const int64_t prefill_seqs = std::min(S, std::max<int64_t>(1, T / kPrefillMinRows));
    p.flashinfer_q = 2 * static_cast<size_t>(T * c.q_dim());
    const int64_t items = int64_t{c.num_attention_heads} * (ceil_div(T, kFlashInferTileRows) + prefill_seqs);
    p.flashinfer_plan = sizeof(int32_t) * static_cast<size_t>(7 * (items + 3) + caps.num_sms + 4);
    if (l.cache.dtype == DType::kF8E4M3) {
      const int64_t pages = std::min(l.cache.num_blocks, prefill_seqs * table);
      p.flashinfer_pages = 2 * static_cast<size_t>(pages * l.cache.block_size * kvh * kFlashInferHeadDim);
      p.flashinfer_page_ids = sizeof(int32_t) * static_cast<size_t>(pages + prefill_seqs * table);
    }
  }

  // Dense products: the FP8 path quantises its x [T, K] (K: H for q/k/v,
  // q_dim for o_proj) unless a producer's FP8 copy is read; the BF16
  // tensor-core path splits x into bf16 hi + lo (the lm_head's R rows, and
  // every linear of a BF16 checkpoint).
  const int64_t K = std::max<int64_t>(H, c.q_dim());
  const bool fp8_paths = c.fp8 && fp8_gemm_mode_for(o.fp8_gemm, caps.features) != Fp8GemmMode::kOff;
  if (fp8_paths) {
    p.fp8_quant_elems = T * K;
    if (o.fused_quant) p.fp8_copy_elems = T * K;
  }
  if (o.bf16_gemm) p.bf16_split_elems = (c.dtype == DType::kBF16 ? R : 0) * H + (lin == DType::kBF16 ? T * K : 0);

  p.step_arrays = (2 * sizeof(int32_t) + sizeof(int64_t)) * static_cast<size_t>(T) + sizeof(int64_t) * R;
  p.sampling = (sizeof(SampleRowArgs) + sizeof(SampleRowResult)) * static_cast<size_t>(R);
  return p;
}

size_t ScratchPlan::fp8_quant_bytes() const {
  return align256(static_cast<size_t>(fp8_quant_elems)) +
         2 * align256(sizeof(float) * static_cast<size_t>(fp8_quant_elems / 128));
}

size_t ScratchPlan::fp8_copy_bytes() const {
  return align256(static_cast<size_t>(fp8_copy_elems)) + align256(sizeof(float) * static_cast<size_t>(fp8_copy_elems / 128));
}

size_t ScratchPlan::total() const {
  const size_t quant = fp8_quant_bytes();
  return route_logits + route_counters + moe + moe_counters + moe_local_routing + attn_partials + attn_decode_partials + attn_counters +
         attn_meta + 2 * flashinfer_q + 2 * flashinfer_pages + flashinfer_page_ids + flashinfer_plan + fp8_copy_bytes() +
         quant + 2 * align256(sizeof(uint16_t) * static_cast<size_t>(bf16_split_elems)) + step_arrays + sampling;
}

std::string ScratchPlan::describe() const {
  auto mib = [](size_t b) { return fmt::format("{:.1f}", b / 1048576.0); };
  return fmt::format(
      "scratch reserved up front (MiB): MoE {}, router {}, attention splits {}, attention work list {}, FlashInfer "
      "q+o {}, FlashInfer FP8 pages as bf16 k+v {}, FP8 copies {}, FP8 quantisation {}, bf16 hi+lo {}, step arrays "
      "and sampling {}; total {} (+ 32 per cuBLASLt path)\n",
      mib(moe + moe_counters + moe_local_routing), mib(route_logits + route_counters), mib(attn_partials + attn_decode_partials + attn_counters),
      mib(attn_meta), mib(2 * flashinfer_q + flashinfer_plan), mib(2 * flashinfer_pages + flashinfer_page_ids),
      mib(fp8_copy_bytes()), mib(fp8_quant_bytes()), mib(4 * static_cast<size_t>(bf16_split_elems)),
      mib(step_arrays + sampling), mib(total()));
}

}  // namespace m2::cuda
