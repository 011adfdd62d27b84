// The CUDA backend's kernel choice (gemm/matmul_plan.h, moe/moe_plan.h,
// attention/attention_plan.h, runtime/cuda_options.h, runtime/step_plan.h):
// pure host functions, so these run without a GPU. Each expectation is the
// rule the plan header states, at the M2.7 shapes (hidden 3072, q 6144, kv
// 1024, experts 256 x 1536 top 8, vocab 200064), on an H200 and on GPUs
// without the Hopper features.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "backend/cuda/attention/attention.h"
#include "backend/cuda/attention/attention_plan.h"
#include "backend/cuda/gemm/matmul_plan.h"
#include "backend/cuda/moe/moe_plan.h"
#include "backend/cuda/runtime/cuda_options.h"
#include "backend/cuda/runtime/device_caps.h"
#include "backend/cuda/runtime/graph_sizes.h"
#include "backend/cuda/runtime/step_plan.h"
#include "io/model_config.h"
#include "util/status.h"

namespace m2::test {
namespace {

using cuda::CudaOptions;
using cuda::MatmulKernel;
using cuda::MoeKernel;

constexpr DType kF8 = DType::kF8E4M3;

cuda::DeviceCaps ada() { return cuda::device_caps(cuda::CudaArch{89, 89, 99 * 1024}, 142); }
cuda::DeviceCaps ampere() { return cuda::device_caps(cuda::CudaArch{80, 80, 163 * 1024}, 108); }

MatmulKernel kernel(int64_t T, int64_t N, int64_t K, DType dt, const CudaOptions& o = {},
                    const cuda::DeviceCaps& caps = cuda::h200_caps()) {
  return cuda::plan_matmul({T, N, K, dt}, o, caps).kernel;
}

TEST(CudaPlan, DenseFp8ByTokenCount) {
  // Decode (<= 16 tokens): the tensor-core GEMV; 17+: cuBLASLt for weights of 1024+ rows and columns.
  for (int64_t T : {1, 4, 16}) EXPECT_EQ(kernel(T, 6144, 3072, kF8), MatmulKernel::kGemvMma) << T;
  for (int64_t T : {17, 64, 8192}) EXPECT_EQ(kernel(T, 6144, 3072, kF8), MatmulKernel::kFp8CublasLt) << T;
  EXPECT_EQ(kernel(64, 256, 256, kF8), MatmulKernel::kFp8Own);   // below kLtMinDim: cuBLASLt was wrong there
  EXPECT_EQ(kernel(64, 1024, 3072, kF8), MatmulKernel::kFp8CublasLt);  // k_proj, v_proj
  CudaOptions own;
  own.fp8_gemm = cuda::Fp8GemmMode::kOwn;
  EXPECT_EQ(kernel(64, 6144, 3072, kF8, own), MatmulKernel::kFp8Own);
  CudaOptions off;
  off.fp8_gemm = cuda::Fp8GemmMode::kOff;
  EXPECT_EQ(kernel(64, 6144, 3072, kF8, off), MatmulKernel::kTiledSimt);
  EXPECT_EQ(kernel(4, 6144, 3072, kF8, off), MatmulKernel::kGemvMma);  // decode is fp32 either way
  CudaOptions simt_gemv;
  simt_gemv.gemv_mma = false;
  EXPECT_EQ(kernel(4, 6144, 3072, kF8, simt_gemv), MatmulKernel::kGemv);
}

TEST(CudaPlan, CublasLtTakesTheRowsOfWholeMultiplesOf16) {
  const cuda::MatmulPlan p = cuda::plan_matmul({7121, 6144, 3072, kF8}, {}, cuda::h200_caps());
  EXPECT_EQ(p.kernel, MatmulKernel::kFp8CublasLt);
  EXPECT_EQ(p.lt_rows, 7120);
  EXPECT_EQ(p.own_rows, 1);
  EXPECT_EQ(p.fallback, MatmulKernel::kFp8Own);
  EXPECT_TRUE(p.fp8_activations);
  const cuda::MatmulPlan whole = cuda::plan_matmul({64, 6144, 3072, kF8}, {}, cuda::h200_caps());
  EXPECT_EQ(whole.lt_rows, 64);
  EXPECT_EQ(whole.own_rows, 0);
}

TEST(CudaPlan, Bf16AndUnalignedShapes) {
  EXPECT_EQ(kernel(1, 200064, 3072, DType::kBF16), MatmulKernel::kGemv);
  EXPECT_EQ(cuda::plan_matmul({1, 200064, 3072, DType::kBF16}, {}, cuda::h200_caps()).tokens_per_pass, 1);
  EXPECT_EQ(cuda::plan_matmul({4, 200064, 3072, DType::kBF16}, {}, cuda::h200_caps()).tokens_per_pass, 4);
  const cuda::MatmulPlan lm = cuda::plan_matmul({64, 200064, 3072, DType::kBF16}, {}, cuda::h200_caps());
  EXPECT_EQ(lm.kernel, MatmulKernel::kBf16CublasLt);
  EXPECT_EQ(lm.fallback, MatmulKernel::kTiledSimt);
  EXPECT_FALSE(lm.fp8_activations);
  // FP8 rows that are not a multiple of 128, unaligned buffers: the kernels that take anything.
  EXPECT_EQ(kernel(64, 200, 3072, kF8), MatmulKernel::kTiledSimt);
  cuda::MatmulShape unaligned{4, 6144, 3072, kF8};
  unaligned.aligned = false;
  EXPECT_EQ(cuda::plan_matmul(unaligned, {}, cuda::h200_caps()).kernel, MatmulKernel::kTiledSimt);
  EXPECT_EQ(kernel(4, 64, 3, DType::kF32), MatmulKernel::kTiledSimt);  // rows of 12 bytes: no 16-byte loads
}

TEST(CudaPlan, OtherGpusFallBack) {
  // Ada: FP8 mma but too little shared memory for our tiles; no cuBLASLt block scaling; Ampere: no FP8 mma.
  for (const cuda::DeviceCaps& caps : {ada(), ampere()}) {
    EXPECT_EQ(kernel(64, 6144, 3072, kF8, {}, caps), MatmulKernel::kTiledSimt);
    const cuda::MoePlan m = cuda::plan_moe({64, 8, 3072, 1536, 256, kF8}, {}, caps);
    EXPECT_EQ(m.kernel, MoeKernel::kGroupedSimt);
    EXPECT_EQ(cuda::plan_moe({1, 8, 3072, 1536, 256, kF8}, {}, caps).kernel, MoeKernel::kDecodeSimt);
    EXPECT_FALSE(caps.flashinfer_prefill);
  }
}

TEST(CudaPlan, MoeByPairs) {
  const cuda::DeviceCaps h200 = cuda::h200_caps();
  const MoeKernel decode = h200.features.wgmma ? MoeKernel::kDecodeWgmma : MoeKernel::kDecodeSimt;
  EXPECT_EQ(cuda::plan_moe({1, 8, 3072, 1536, 256, kF8}, {}, h200).kernel, decode);
  EXPECT_EQ(cuda::plan_moe({8, 8, 3072, 1536, 256, kF8}, {}, h200).kernel, decode);  // 64 pairs
  const cuda::MoePlan grouped = cuda::plan_moe({9, 8, 3072, 1536, 256, kF8}, {}, h200);  // 72 pairs
  EXPECT_EQ(grouped.kernel, h200.features.cutlass_moe ? MoeKernel::kGroupedCutlass : MoeKernel::kGroupedFp8);
  EXPECT_TRUE(grouped.fp8_activations);
  CudaOptions no_cutlass;
  no_cutlass.moe_cutlass = false;
  const cuda::MoePlan own = cuda::plan_moe({9, 8, 3072, 1536, 256, kF8}, no_cutlass, h200);
  EXPECT_EQ(own.kernel, MoeKernel::kGroupedFp8);
  EXPECT_EQ(own.tile_pairs, 16);  // 72 pairs over 256 experts: tiles of 16 (at most 8 pairs an expert on average)
  EXPECT_EQ(cuda::plan_moe({256, 8, 3072, 1536, 256, kF8}, no_cutlass, h200).tile_pairs, 16);
  EXPECT_EQ(cuda::plan_moe({257, 8, 3072, 1536, 256, kF8}, no_cutlass, h200).tile_pairs, 64);
  CudaOptions stream;
  stream.moe_decode_wgmma = false;
  EXPECT_EQ(cuda::plan_moe({1, 8, 3072, 1536, 256, kF8}, stream, h200).kernel, MoeKernel::kDecodeSimt);
  // BF16 experts, or widths off the 128 grid: fp32 tiles of 4 pairs.
  EXPECT_EQ(cuda::plan_moe({64, 8, 3072, 1536, 256, DType::kBF16}, {}, h200).kernel, MoeKernel::kGroupedSimt);
  EXPECT_EQ(cuda::plan_moe({64, 8, 3072, 1500, 256, kF8}, {}, h200).tile_pairs, 4);
}

TEST(CudaPlan, RouterGemmFrom17Tokens) {
  EXPECT_EQ(cuda::plan_route(16, 256, 3072, DType::kF32, {}), cuda::RouteKernel::kFused);
  EXPECT_EQ(cuda::plan_route(17, 256, 3072, DType::kF32, {}), cuda::RouteKernel::kGemm);
  EXPECT_EQ(cuda::plan_route(64, 256, 3072, DType::kBF16, {}), cuda::RouteKernel::kFused);
  CudaOptions off;
  off.route_gemm = false;
  EXPECT_EQ(cuda::plan_route(64, 256, 3072, DType::kF32, off), cuda::RouteKernel::kFused);
}

TEST(CudaPlan, AttentionPathByRows) {
  using cuda::AttnPath;
  EXPECT_EQ(cuda::attention_path(1, true, true), AttnPath::kDecode);
  EXPECT_EQ(cuda::attention_path(15, true, true), AttnPath::kGeneral);
  EXPECT_EQ(cuda::attention_path(16, true, true), AttnPath::kPrefill);
  EXPECT_EQ(cuda::attention_path(8192, false, true), AttnPath::kGeneral);  // tc_attention=off or an F32 cache
  EXPECT_EQ(cuda::attention_path(1, true, false), AttnPath::kGeneral);
}

TEST(CudaOptions, ParsesTheUserKeysAndNamesWhatItCannotTake) {
  CudaOptions o;
  ASSERT_TRUE(o.apply("fp8_gemm=own, moe_cutlass=off,attn_prefill=mma,graphs=0,sync=on,pdl=false", "--cuda-options")
                  .ok());
  EXPECT_EQ(o.fp8_gemm, cuda::Fp8GemmMode::kOwn);
  EXPECT_FALSE(o.moe_cutlass || o.flashinfer_prefill || o.graphs || o.pdl);
  EXPECT_TRUE(o.sync_each_op);
  EXPECT_EQ(o.describe().substr(0, 40), "fp8_gemm=own,moe_cutlass=off,attn_prefil");
  const Status bad_value = o.apply("fp8_gemm=fast", "--cuda-options");
  EXPECT_EQ(bad_value.message(), "--cuda-options: fp8_gemm=fast is not one of cublaslt, own, off");
  const Status bad_key = o.apply("route_gemm=off", "M2CPP_CUDA_OPTIONS");  // a test variant, not a user key
  EXPECT_NE(bad_key.message().find("M2CPP_CUDA_OPTIONS: unknown key 'route_gemm'"), std::string::npos);
  EXPECT_FALSE(o.apply("graphs", "--cuda-options").ok());
  EXPECT_FALSE(o.apply("sync=maybe", "--cuda-options").ok());
}

TEST(CudaOptions, TheFlagWinsOverTheEnvironment) {
  ASSERT_EQ(setenv("M2CPP_CUDA_OPTIONS", "fp8_gemm=off,graphs=off", 1), 0);
  auto o = CudaOptions::parse("fp8_gemm=own");
  unsetenv("M2CPP_CUDA_OPTIONS");
  ASSERT_TRUE(o.ok()) << o.status().message();
  EXPECT_EQ(o->fp8_gemm, cuda::Fp8GemmMode::kOwn);
  EXPECT_FALSE(o->graphs);
  ASSERT_EQ(setenv("M2CPP_CUDA_OPTIONS", "nonsense", 1), 0);
  auto bad = CudaOptions::parse("");
  unsetenv("M2CPP_CUDA_OPTIONS");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("M2CPP_CUDA_OPTIONS"), std::string::npos);
}

ModelConfig m27() {
  ModelConfig c;
  c.hidden_size = 3072, c.intermediate_size = 1536, c.vocab_size = 200064;
  c.num_hidden_layers = 62, c.num_attention_heads = 48, c.num_key_value_heads = 8, c.head_dim = 128;
  c.num_local_experts = 256, c.num_experts_per_tok = 8;
  c.dtype = DType::kBF16;
  c.fp8 = Fp8Quantization{};
  return c;
}

bool has_line(const std::string& text, const std::string& op, const std::string& kernel) {
  size_t at = 0;
  while ((at = text.find(op, at)) != std::string::npos) {
    const size_t end = text.find('\n', at);
    if (text.substr(at, end - at).find(kernel) != std::string::npos) return true;
    at = end;
  }
  return false;
}

TEST(CudaPlan, StepPlanNamesEveryKernelOfAStep) {
  const cuda::DeviceCaps h200 = cuda::h200_caps();
  const std::string d4 = cuda::describe_step_plan(m27(), {4, 1, 1024, kF8}, {}, h200);
  EXPECT_TRUE(has_line(d4, "qkv_proj [6144+1024+1024, 3072]", "stacked, one pass: gemv_mma")) << d4;
  EXPECT_TRUE(has_line(d4, "attention", "4 decode rows on decode_simt (8 splits of 128 keys)")) << d4;
  EXPECT_TRUE(has_line(d4, "route", "route_fused")) << d4;
  EXPECT_TRUE(has_line(d4, "lm_head", "gemv (4 tokens a pass over W)")) << d4;
  EXPECT_EQ(d4.find("FP8 copy"), std::string::npos) << "decode steps write no FP8 copies\n" << d4;
  const std::string d64 = cuda::describe_step_plan(m27(), {64, 1, 1024, kF8}, {}, h200);
  EXPECT_TRUE(has_line(d64, "q_proj", "fp8_cublaslt on 64 rows")) << d64;
  EXPECT_TRUE(has_line(d64, "q_proj", "x from the norm's FP8 copy")) << d64;
  EXPECT_TRUE(has_line(d64, "attention", "64 decode rows on decode_mma (1 split")) << d64;
  EXPECT_TRUE(has_line(d64, "route", "route_gemm")) << d64;
  EXPECT_TRUE(has_line(d64, "lm_head", "bf16_cublaslt")) << d64;
  const std::string p = cuda::describe_step_plan(m27(), {1, 8192, 8192, kF8}, {}, h200);
  EXPECT_TRUE(has_line(p, "attention", h200.flashinfer_prefill ? "1 prefill seq on flashinfer" : "prefill_mma")) << p;
  EXPECT_TRUE(has_line(p, "o_proj", "x from attention's FP8 copy")) << p;
  EXPECT_TRUE(has_line(p, "scratch (MiB)", "FP8 copies 49.5")) << p;  // 8192 x 6144 codes + a scale per 128
  EXPECT_TRUE(has_line(d4, "scratch (MiB)", "FP8 copies 0.0")) << d4;
  // The MoE scratch grows with the step: what the buffer must hold for the largest one.
  const cuda::MoeShape small{64, 8, 3072, 1536, 256, kF8}, large{8192, 8, 3072, 1536, 256, kF8};
  EXPECT_LT(cuda::plan_moe(small, {}, h200).scratch_bytes, cuda::plan_moe(large, {}, h200).scratch_bytes);
  CudaOptions mma;
  mma.flashinfer_prefill = false;
  EXPECT_TRUE(has_line(cuda::describe_step_plan(m27(), {1, 8192, 8192, kF8}, mma, h200), "attention", "prefill_mma"));
}

// --batch-invariant: every op's kernel is a function of its weights alone,
// the same at 1 token as at 8192, and attention's key splits fall at fixed
// positions (so a sequence's rows do not depend on the step).
TEST(CudaPlan, BatchInvariantKernelsDoNotDependOnTheStep) {
  const cuda::DeviceCaps h200 = cuda::h200_caps();
  CudaOptions o;
  o.batch_invariant = true;
  for (int64_t T : {1, 4, 16, 17, 64, 7121, 8192}) {
    const cuda::MatmulPlan q = cuda::plan_matmul({T, 6144, 3072, kF8}, o, h200);
    EXPECT_EQ(q.kernel, MatmulKernel::kFp8Own) << T;  // W8A8 even for one token; never cuBLASLt
    EXPECT_TRUE(q.fp8_activations) << T;
    EXPECT_EQ(q.own_rows, 0) << T;
    EXPECT_EQ(kernel(T, 256, 256, kF8, o), MatmulKernel::kFp8Own) << T;
    EXPECT_EQ(kernel(T, 200064, 3072, DType::kBF16, o), MatmulKernel::kGemv) << T;  // lm_head
    EXPECT_EQ(kernel(T, 192, 96, kF8, o), MatmulKernel::kGemv) << T;   // off the 128 grid: the GEMV at every T
    EXPECT_EQ(kernel(T, 64, 3, DType::kF32, o), MatmulKernel::kTiledSimt) << T;
    EXPECT_EQ(cuda::plan_moe({T, 8, 3072, 1536, 256, kF8}, o, h200).kernel, MoeKernel::kGroupedFp8) << T;
    EXPECT_EQ(cuda::plan_moe({T, 8, 3072, 1500, 256, kF8}, o, h200).kernel, MoeKernel::kGroupedSimt) << T;
    EXPECT_EQ(cuda::plan_route(T, 256, 3072, DType::kF32, o), cuda::RouteKernel::kFused) << T;
  }
  CudaOptions off = o;
  off.fp8_gemm = cuda::Fp8GemmMode::kOff;  // fp32 activations everywhere, still one kernel per weight
  for (int64_t T : {1, 64}) EXPECT_EQ(kernel(T, 6144, 3072, kF8, off), MatmulKernel::kGemv) << T;

  using cuda::attention_splits_invariant;
  EXPECT_EQ(attention_splits_invariant(1).splits, 1);
  EXPECT_EQ(attention_splits_invariant(512).splits, 1);
  EXPECT_EQ(attention_splits_invariant(513).splits, 2);
  EXPECT_EQ(attention_splits_invariant(200000).split_keys, cuda::kInvariantSplitKeys);
  EXPECT_EQ(cuda::kInvariantSplitKeys % 128, 0);  // whole rounds of the general kernel's 4 warps x 32 keys
  // Items per launch: their partials within the budget, at least one.
  const int splits = attention_splits_invariant(196608).splits;
  const int64_t per = cuda::attention_invariant_items_per_launch(8, 128, splits);
  EXPECT_LE(per * sizeof(float) * cuda::attention_partial_floats(1, 8, 128, splits), cuda::kInvariantPartialBytes);
  EXPECT_GE(per, 1);

  // A decode row on the prefill kernel (an FP8 or BF16 cache of head_dim 128), never FlashInfer.
  using cuda::AttnPath;
  for (int64_t rows : {1, 15, 16, 8192}) {
    EXPECT_EQ(cuda::attention_path(rows, true, true, true), AttnPath::kPrefill) << rows;
    EXPECT_EQ(cuda::attention_path(rows, false, true, true), AttnPath::kGeneral) << rows;
  }
  const std::string d1 = cuda::describe_step_plan(m27(), {1, 1, 1024, kF8}, o, h200);
  EXPECT_TRUE(has_line(d1, "attention", "1 prefill seq on prefill_mma (every row count: batch-invariant)")) << d1;
  EXPECT_TRUE(has_line(d1, "q_proj", "fp8_own, x from the norm's FP8 copy")) << d1;
  EXPECT_TRUE(has_line(d1, "o_proj", "x from attention's FP8 copy")) << d1;
  EXPECT_TRUE(has_line(d1, "moe", "grouped_fp8")) << d1;
  EXPECT_TRUE(has_line(d1, "lm_head", "gemv")) << d1;
  const std::string p = cuda::describe_step_plan(m27(), {1, 8192, 8192, kF8}, o, h200);
  EXPECT_TRUE(has_line(p, "attention", "1 prefill seq on prefill_mma")) << p;
  // An F32 cache (or tc_attention=off): the general kernel, its keys split at fixed positions.
  const std::string f1 = cuda::describe_step_plan(m27(), {1, 1, 1024, DType::kF32}, o, h200);
  EXPECT_TRUE(has_line(f1, "attention", "1 seq on attention_simt (2 splits of 512 keys at fixed positions)")) << f1;
  const std::string f8k = cuda::describe_step_plan(m27(), {1, 8192, 8192, DType::kF32}, o, h200);
  EXPECT_TRUE(has_line(f8k, "attention", "1 seq on attention_simt (16 splits of 512 keys")) << f8k;
  EXPECT_FALSE(has_line(f8k, "o_proj", "x from attention's FP8 copy")) << f8k;
  CudaOptions parsed;
  ASSERT_TRUE(parsed.apply("batch_invariant=on", "--cuda-options").ok());
  EXPECT_TRUE(parsed.batch_invariant);
  EXPECT_NE(parsed.describe().find("batch_invariant=on"), std::string::npos);
}

// A recorded decode step's splits depend on its blocks only (each sequence's
// keys are divided among them in the kernel): never fewer than an eager
// step's, the same for every context length.
TEST(CudaPlan, RecordedDecodeSplitsDoNotDependOnTheContext) {
  for (int64_t blocks : {8, 16, 48, 128, 263, 264, 2048}) {
    const cuda::AttentionSplits at256 = cuda::attention_splits_recorded(blocks, 256, 132, cuda::kDecodeTileKeys);
    for (int64_t keys : {1, 64, 256, 1000, 4096, 32768, 200000}) {
      const cuda::AttentionSplits r = cuda::attention_splits_recorded(blocks, keys, 132, cuda::kDecodeTileKeys);
      const cuda::AttentionSplits e = cuda::attention_splits(blocks, keys, 132, cuda::kDecodeTileKeys);
      EXPECT_EQ(r.splits, at256.splits) << blocks << " blocks, " << keys << " keys";
      EXPECT_GE(r.splits, e.splits) << blocks << " blocks, " << keys << " keys";
      EXPECT_GE(static_cast<int64_t>(r.splits) * r.split_keys, keys) << "the longest sequence's share covers it";
      EXPECT_EQ(r.split_keys % cuda::kDecodeTileKeys, 0);
    }
  }
  EXPECT_EQ(cuda::attention_splits_recorded(8, 300, 132, cuda::kDecodeTileKeys).splits, 33);
  EXPECT_EQ(cuda::attention_splits_recorded(264, 300, 132, cuda::kDecodeTileKeys).splits, 1);
}

// Decode graphs are recorded at a fixed set of batch sizes: every size up to
// 16, then steps of 8, 16, 32; each size pads to the smallest one at or
// above it, and there are kGraphSizes of them up to kMaxGraphRows.
TEST(CudaPlan, DecodeGraphSizes) {
  for (int64_t r = 1; r <= 16; ++r) EXPECT_EQ(cuda::graph_capture_rows(r), r);
  EXPECT_EQ(cuda::graph_capture_rows(17), 24);
  EXPECT_EQ(cuda::graph_capture_rows(24), 24);
  EXPECT_EQ(cuda::graph_capture_rows(61), 64);
  EXPECT_EQ(cuda::graph_capture_rows(65), 80);
  EXPECT_EQ(cuda::graph_capture_rows(256), 256);
  EXPECT_EQ(cuda::graph_capture_rows(257), 288);
  EXPECT_EQ(cuda::graph_capture_rows(cuda::kMaxGraphRows), cuda::kMaxGraphRows);
  std::vector<int64_t> sizes;
  for (int64_t r = 1; r <= cuda::kMaxGraphRows; ++r) {
    const int64_t p = cuda::graph_capture_rows(r);
    ASSERT_GE(p, r);
    EXPECT_EQ(cuda::graph_capture_rows(p), p) << "a capture size pads to itself";
    EXPECT_LE(p - r, std::max<int64_t>(r / 2, 0)) << "at most half a step of padding";
    if (sizes.empty() || sizes.back() != p) sizes.push_back(p);
  }
  EXPECT_EQ(static_cast<int64_t>(sizes.size()), cuda::kGraphSizes);
}

}  // namespace
}  // namespace m2::test
