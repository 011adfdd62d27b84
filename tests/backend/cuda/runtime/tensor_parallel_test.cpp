// Tensor parallelism on the CUDA backend (issue 21): the ranks are threads
// of one process, each with its own CudaBackend (rank r on device r mod the
// GPUs there are: all on device 0 where the device tool lends one), meeting
// either in the in-process communicator through host copies
// (stage_through_host) or in the peer-to-peer kernels
// (make_cuda_peer_communicators), whose decode steps are recorded as graphs.
// Against the unsharded GPU forward on the same weights, as tests/model/
// tensor_parallel_test.cpp holds the CPU ranks to the CPU forward: every
// position's logits within 2e-4 (sharding reassociates fp32 sums only: the
// split dot products of o_proj and the MoE, the QK norm's per-rank sums of
// squares) and the same greedy ids through the ranks' KV caches; the two
// communicators' logits bit-identical (both sum in rank order). What this
// exercises on the GPU: each rank's sliced weights uploaded and multiplied,
// the QK kernel's two phases apart (qk_sum_squares, qk_norm_rope_sums) with
// the all-reduced sums between them, attention over a rank's kv heads
// (replicated above their count), and the vocabulary-split lm_head.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "../cuda_test_util.h"
#include "model/greedy.h"
#include "model/minimax_m2.h"
#include "model/weight_shard.h"

namespace m2::test {
namespace {

struct Case {
  std::string fixture;  // tests/data/<fixture>, or "" for 16 q heads over 4 kv heads
  int tp;
  bool ep = false;  // experts split whole (--enable-expert-parallel)
  // CudaOptions of the unsharded model and the ranks alike (test_options).
  // m2-aligned-fp8 tp 4 + EP runs without FP8 activations: with them its
  // logits part from tp 1's by ~5e-2 from position 9 on, under every MoE and
  // GEMM variant (s21 runs 69-70): fp32 reassociation tips one e4m3 rounding
  // or router choice and attention carries it to the later positions; with
  // fp32 activations the split is exact to 8.5e-6. The W8A8 EP path is held
  // by the tp 2 + EP case and the M2.7-shape runs (docs/status.md).
  std::string variant = "";
};

void PrintTo(const Case& c, std::ostream* os) {
  *os << (c.fixture.empty() ? "dummy" : c.fixture) << " tp " << c.tp << (c.ep ? " ep" : "");
}

std::string case_name(const ::testing::TestParamInfo<Case>& i) {
  std::string f = i.param.fixture.empty() ? "dummy16heads" : i.param.fixture;
  std::replace(f.begin(), f.end(), '-', '_');
  return f + "_tp" + std::to_string(i.param.tp) + (i.param.ep ? "_ep" : "") +
         (i.param.variant.empty() ? "" : "_w8a32");
}

// Rank r's backend: a CudaBackend of device r mod the devices there are
// (on one GPU every rank's; on several, the peers are distinct GPUs).
Result<std::unique_ptr<Backend>> on_devices(int r) {
  auto b = make_cuda_backend(r % std::max(1, cuda_device_count()), test_options());
  if (!b) return errorf("the CUDA backend did not start");
  return b;
}

double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return INFINITY;
  double m = 0;
  for (size_t i = 0; i < a.size(); ++i) m = std::max(m, static_cast<double>(std::abs(a[i] - b[i])));
  return m;
}

class CudaTensorParallel : public ::testing::TestWithParam<Case> {
 protected:
  void SetUp() override {
    if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device";
    const Case& c = GetParam();
    Result<std::unique_ptr<ModelWeights>> w = [&]() -> Result<std::unique_ptr<ModelWeights>> {
      if (!c.fixture.empty()) return load_model(data_path(c.fixture), LoadOptions{});
      auto cfg = load_config_from(data_path("m2-tiny-bf16"));
      if (!cfg.ok()) return cfg.status();
      // (intermediate 128: a rank's 16 columns of BF16 are the 32-byte rows
      // the GPU's MoE kernels read in 16-byte vectors; 96 / 8 = 12 would not be)
      cfg->num_attention_heads = 16, cfg->num_key_value_heads = 4, cfg->intermediate_size = 128;
      return make_dummy_weights(*cfg, 7);
    }();
    ASSERT_TRUE(w.ok()) << w.status().message();
    weights_ = std::move(*w);
    gpu_ = make_cuda_backend(0, test_options(c.variant));
    ASSERT_TRUE(gpu_ && gpu_->prepare_weights(*weights_).ok());
    single_ = std::make_unique<MiniMaxM2>(*weights_, *gpu_);
    ParallelConfig p;
    p.tensor_parallel_size = c.tp, p.expert_parallel = c.ep;
    auto rank_backend = [variant = c.variant](int r) -> Result<std::unique_ptr<Backend>> {
      auto b = make_cuda_backend(r % std::max(1, cuda_device_count()), test_options(variant));
      if (!b) return errorf("the CUDA backend did not start");
      return b;
    };
    auto g = MiniMaxM2::tensor_parallel(*weights_, p, rank_backend);
    ASSERT_TRUE(g.ok()) << g.status().message();
    group_ = std::move(*g);
    auto pg = MiniMaxM2::tensor_parallel(*weights_, p, rank_backend, make_cuda_peer_communicators);
    ASSERT_TRUE(pg.ok()) << pg.status().message();
    peer_ = std::move(*pg);
    for (int i = 0; i < 40; ++i) prompt_.push_back((i * 37 + 11) % weights_->config.vocab_size);
  }
  std::unique_ptr<ModelWeights> weights_;
  std::unique_ptr<Backend> gpu_;
  std::unique_ptr<MiniMaxM2> single_, group_;  // group_: collectives staged through the host
  std::unique_ptr<MiniMaxM2> peer_;           // the same ranks meeting in the peer-to-peer kernels
  std::vector<int32_t> prompt_;
};

TEST_P(CudaTensorParallel, LogitsOfEveryPositionEqualTheUnshardedForward) {
  auto want = all_logits(*single_, prompt_, DType::kF32);
  auto got = all_logits(*group_, prompt_, DType::kF32);
  ASSERT_TRUE(want.ok() && got.ok()) << got.status().message();
  const double d = max_abs_diff(*got, *want);
  std::printf("max |logit delta| %.3g over %zu positions\n", d, prompt_.size());
  EXPECT_LE(d, 2e-4);
}

TEST_P(CudaTensorParallel, GreedyIdsThroughTheKvCacheAreIdentical) {
  GreedyOptions o;
  o.max_tokens = 12;
  o.ignore_eos = true;
  o.prefill_chunk = 7;  // prefill chunks, then decodes reading the ranks' caches
  // (BF16: on F32 KV the unsharded model's general attention launch, which
  // chunks of 7 rows take, was refused in this process though m2cpp generate
  // runs it: an open finding, docs/status.md)
  o.kv_dtype = DType::kBF16;
  const std::span<const int32_t> prompt = std::span(prompt_).first(24);
  auto want = generate_greedy(*single_, prompt, o);
  auto got = generate_greedy(*group_, prompt, o);
  ASSERT_TRUE(want.ok() && got.ok()) << got.status().message();
  EXPECT_EQ(*got, *want);
}

// The peer-to-peer collectives (kernels on each rank's stream) sum in rank
// order as the host-staged ones do: the group's logits are their bits.
TEST_P(CudaTensorParallel, ThePeerCollectivesGiveTheStagedGroupsLogits) {
  auto staged = all_logits(*group_, prompt_, DType::kF32);
  auto peer = all_logits(*peer_, prompt_, DType::kF32);
  ASSERT_TRUE(staged.ok() && peer.ok()) << peer.status().message();
  ASSERT_EQ(peer->size(), staged->size());
  EXPECT_EQ(std::memcmp(peer->data(), staged->data(), peer->size() * sizeof(float)), 0)
      << "max |delta| " << max_abs_diff(*peer, *staged);
}

// Decode steps through the peer collectives give the unsharded model's ids.
// Ranks with GPUs of their own record and replay their steps as graphs (the
// all-reduces inside them); ranks sharing a GPU run them eagerly
// (peer_communicator.cpp: a replay cannot be gated against the shared GPU).
TEST_P(CudaTensorParallel, DecodeStepsThroughThePeerCollectivesGiveTheSameIds) {
  GreedyOptions o;
  o.max_tokens = 12;
  o.ignore_eos = true;
  o.prefill_chunk = 7;
  o.kv_dtype = DType::kBF16;
  const std::span<const int32_t> prompt = std::span(prompt_).first(24);
  auto want = generate_greedy(*single_, prompt, o);
  const int64_t recorded_before = cuda_graphs_recorded(peer_->backend());
  auto got = generate_greedy(*peer_, prompt, o);
  ASSERT_TRUE(want.ok() && got.ok()) << got.status().message();
  EXPECT_EQ(*got, *want);
  const bool own_gpus = cuda_device_count() >= GetParam().tp;
  if (test_options().graphs && own_gpus) {
    EXPECT_GT(cuda_graphs_recorded(peer_->backend()), recorded_before);
  }
  if (!own_gpus) {
    EXPECT_EQ(cuda_graphs_recorded(peer_->backend()), recorded_before) << "co-located ranks record no graph";
  }
}

INSTANTIATE_TEST_SUITE_P(OneGpu, CudaTensorParallel,
                         ::testing::Values(Case{"m2-tiny-bf16", 2},          // 2 q / 1 kv head per rank
                                           Case{"m2-tiny-bf16", 4},          // kv heads replicated (2 over 4 ranks)
                                           Case{"m2-aligned-fp8", 2},        // FP8 slices on the 128 blocks
                                           Case{"", 8},                      // 8 ranks, each kv head on 2
                                           Case{"m2-tiny-bf16", 2, true},    // EP: 4 of 8 experts per rank
                                           Case{"m2-aligned-fp8", 2, true},  // EP: 2 of 4 FP8 experts per rank
                                           Case{"m2-aligned-fp8", 4, true, "fp8_gemm=off"},  // 1 of 4, W8A32
                                           Case{"", 8, true}),               // EP: 1 of 8 experts per rank
                         case_name);

// Dummy FP8 weights generated on the GPU (m2cpp's --load-format dummy on
// --device cuda) shard into the same bytes as host-filled ones: the row slices
// from the tensors' placeholders, the column slices (o_proj, w2) generated
// through their windows. The group's logits are the host-filled group's bits.
TEST(CudaTensorParallelConfig, DummyWeightsGeneratedOnTheGpuShardAsTheHostFillDoes) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device";
  auto cfg = load_config_from(data_path("m2-aligned-fp8"));
  ASSERT_TRUE(cfg.ok());
  auto host = make_dummy_weights(*cfg, 11, false);
  auto dev = make_dummy_weights(*cfg, 11, true);
  ASSERT_TRUE(host.ok() && dev.ok());
  ParallelConfig p;
  p.tensor_parallel_size = 2;
  auto a = MiniMaxM2::tensor_parallel(**host, p, on_devices, make_cuda_peer_communicators);
  auto b = MiniMaxM2::tensor_parallel(**dev, p, on_devices, make_cuda_peer_communicators);
  ASSERT_TRUE(a.ok() && b.ok()) << b.status().message();
  std::vector<int32_t> prompt;
  for (int i = 0; i < 20; ++i) prompt.push_back((i * 53 + 5) % cfg->vocab_size);
  auto want = all_logits(**a, prompt, DType::kF32);
  auto got = all_logits(**b, prompt, DType::kF32);
  ASSERT_TRUE(want.ok() && got.ok()) << got.status().message();
  ASSERT_EQ(got->size(), want->size());
  EXPECT_EQ(std::memcmp(got->data(), want->data(), got->size() * sizeof(float)), 0)
      << "max |delta| " << max_abs_diff(*got, *want);
}

// A shard whose expert rows the GPU's kernels cannot read (m2-tiny-bf16's 96
// intermediate columns over 8 ranks: 12 BF16 = 24 bytes) is refused when
// its weights are prepared, naming the layer, not when a step runs.
TEST(CudaTensorParallelConfig, ExpertRowsTooNarrowForTheKernelsAreRefused) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device";
  auto cfg = load_config_from(data_path("m2-tiny-bf16"));
  ASSERT_TRUE(cfg.ok());
  cfg->num_attention_heads = 16, cfg->num_key_value_heads = 4;
  auto w = make_dummy_weights(*cfg, 7);
  ASSERT_TRUE(w.ok());
  ParallelConfig p;
  p.tensor_parallel_size = 8;
  auto g = MiniMaxM2::tensor_parallel(**w, p, on_devices);
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.status().message().find("layer 0 experts: w2 rows of 12 BF16 elements (24 bytes)"), std::string::npos)
      << g.status().message();
}

}  // namespace
}  // namespace m2::test
