// The CUDA backend's up-front scratch (runtime/scratch_plan.h): pure host
// arithmetic, so this runs without a GPU. Each buffer must hold what its op
// asks for at every step within the limits (the op's own plan, asked here
// at step shapes the sizing loop does not single out), and no more than the
// limits imply: the attention split partials no longer scale with the step's
// tokens, and FlashInfer's bf16 page copies stop at the cache's blocks. On
// the H200 the step mix checks that nothing grows past these sizes
// (tests/backend/cuda/step_mix_test.cpp).
#include <gtest/gtest.h>

#include "backend/cuda/attention/attention.h"
#include "backend/cuda/attention/attention_plan.h"
#include "backend/cuda/moe/moe_plan.h"
#include "backend/cuda/runtime/device_caps.h"
#include "backend/cuda/runtime/scratch_plan.h"
#include "model/kv_cache.h"

namespace m2::test {
namespace {

ModelConfig m27() {
  ModelConfig c;
  c.hidden_size = 3072, c.intermediate_size = 1536, c.vocab_size = 200064, c.max_position_embeddings = 196608;
  c.num_hidden_layers = 62, c.num_attention_heads = 48, c.num_key_value_heads = 8, c.head_dim = 128;
  c.num_local_experts = 256, c.num_experts_per_tok = 8;
  c.dtype = DType::kBF16;
  c.fp8 = Fp8Quantization{};
  return c;
}

StepLimits limits(int64_t tokens, int64_t seqs, int64_t blocks, DType kv = DType::kF8E4M3) {
  StepLimits l;
  l.max_tokens = tokens, l.max_seqs = seqs, l.max_logit_rows = std::min(tokens, seqs + 256);
  l.max_context = 196608;
  l.cache.num_layers = 62, l.cache.num_kv_heads = 8, l.cache.head_dim = 128, l.cache.block_size = 16;
  l.cache.num_blocks = blocks, l.cache.dtype = kv;
  return l;
}

TEST(ScratchPlan, HoldsWhatEachOpAsksAtEveryStepWithinTheLimits) {
  const ModelConfig c = m27();
  const cuda::DeviceCaps h200 = cuda::h200_caps();
  const StepLimits l = limits(2048, 256, 80000);
  const cuda::ScratchPlan p = cuda::plan_scratch(c, l, {}, h200);
  for (int64_t t : {1, 3, 4, 8, 16, 17, 63, 64, 65, 500, 1024, 2047, 2048}) {
    const cuda::MoePlan m = cuda::plan_moe({t, 8, 3072, 1536, 256, DType::kF8E4M3}, {}, h200);
    EXPECT_LE(m.scratch_bytes, p.moe) << t << " tokens";
    EXPECT_LE(sizeof(float) * static_cast<size_t>(t * 256), p.route_logits) << t << " tokens";
  }
  // Decode steps of n sequences at the longest context a recorded step is
  // sized for (the context bound: 262144 for 196608), as the op splits them.
  for (int64_t n : {1, 2, 7, 33, 256}) {
    const cuda::AttentionSplits sp = cuda::attention_splits(n * 8, 262144, h200.num_sms, cuda::kDecodeTileKeys);
    if (sp.splits > 1) {
      EXPECT_LE(sizeof(float) * cuda::attention_decode_partial_floats(n, 8, sp.splits), p.attn_decode_partials) << n;
    }
  }
  for (int64_t items : {1, 5, 32}) {
    const cuda::AttentionSplits sp = cuda::attention_splits(items * 8, 262144, h200.num_sms, 128);
    EXPECT_LE(sizeof(float) * cuda::attention_partial_floats(items, 8, 128, sp.splits), p.attn_partials) << items;
  }
  EXPECT_GT(p.attn_decode_partials, 0u);
  EXPECT_EQ(p.fp8_quant_elems, 2048 * 6144);  // the widest FP8 input: o_proj's q_dim
  EXPECT_EQ(p.fp8_copy_elems, 2048 * 6144);
  EXPECT_EQ(p.bf16_split_elems, l.max_logit_rows * 3072);  // the BF16 lm_head only
  EXPECT_GE(p.total(), p.moe + p.route_logits + p.attn_meta);
}

TEST(ScratchPlan, BoundedByTheLimitsNotByTheWorstRowCount) {
  const ModelConfig c = m27();
  const cuda::DeviceCaps h200 = cuda::h200_caps();
  // The general attention kernel's split partials are per work item: the
  // same for 2K and 16K tokens (they were T x heads x splits: 6.6 GB at 8K).
  const cuda::ScratchPlan a = cuda::plan_scratch(c, limits(2048, 256, 80000), {}, h200);
  const cuda::ScratchPlan b = cuda::plan_scratch(c, limits(16384, 256, 80000), {}, h200);
  EXPECT_EQ(a.attn_partials, b.attn_partials);
  EXPECT_LT(a.attn_partials, size_t{16} << 20);
  // FlashInfer's bf16 copies of FP8 pages: each page once, so at most the
  // cache's blocks (k, and as much for v)...
  if (h200.flashinfer_prefill) {
    const cuda::ScratchPlan small = cuda::plan_scratch(c, limits(2048, 256, 100), {}, h200);
    EXPECT_EQ(small.flashinfer_pages, size_t{100} * 16 * 8 * 128 * 2);
    // ... and none for a BF16 cache, read in place.
    EXPECT_EQ(cuda::plan_scratch(c, limits(2048, 256, 100, DType::kBF16), {}, h200).flashinfer_pages, 0u);
  }
  // Serve's defaults with a 32 GiB FP8 cache: a few GiB at most.
  KvCacheShape one = limits(1, 1, 1).cache;
  const int64_t blocks = (int64_t{32} << 30) / static_cast<int64_t>(KvCache::storage_bytes(one));
  EXPECT_LT(cuda::plan_scratch(c, limits(2048, 256, blocks), {}, h200).total(), size_t{4} << 30);
}

TEST(ScratchPlan, PathsThatAreOffTakeNothing) {
  const ModelConfig c = m27();
  cuda::CudaOptions off;
  off.fp8_gemm = cuda::Fp8GemmMode::kOff;
  off.bf16_gemm = false;
  const cuda::ScratchPlan p = cuda::plan_scratch(c, limits(2048, 256, 1000), off, cuda::h200_caps());
  EXPECT_EQ(p.fp8_quant_elems, 0);
  EXPECT_EQ(p.fp8_copy_elems, 0);
  EXPECT_EQ(p.bf16_split_elems, 0);
}

}  // namespace
}  // namespace m2::test
