// What a busy server does to the CUDA backend, against the CPU backend: a
// small model whose every matrix is a multiple of 128 (so the FP8 tensor-core
// GEMMs, the CUTLASS MoE, FlashInfer's prefill attention and the tensor-core
// decode attention all run), driven through random steps the way the engine
// builds them: prefill chunks of odd lengths beside decode rows in one step,
// decode-only steps (recorded as graphs and replayed while the block tables
// grow), block tables from a shuffled pool of blocks, and recompute
// preemption (a sequence's blocks freed and its tokens prefilled again).
// Issue 29's crash (a decode graph replayed after the tables grew read block
// ids as sequences) dies here, or fails the comparison.
//
// Bounds (relative L2 error of a row's logits against the CPU's). Routing
// is discrete: a perturbation that swaps one of a token's top-4 experts
// changes that token's output outright, and on this random-weight model the
// bf16 q, k, v of the tensor-core attentions already swap some (17 % in a
// row of the first step, measured on the H200). So:
//   - fp32 paths (fp8_gemm=off, tc_attention=off: fp32
//     activations and attention everywhere, as the CPU): within kOffBound.
//     A row computed from the wrong keys, rows or blocks differs by about
//     100 %: this is the check that catches indexing bugs in the work lists,
//     paging, graphs, KV stores and MoE grouping.
//   - the default paths (FP8 tensor cores, FlashInfer, tensor-core decode
//     attention): steps of 17+ rows quantise activations to e4m3 per token
//     per 128 channels (W8A8, as vLLM and SGLang run FP8 checkpoints) and the
//     CPU does not (W8A32), and every later row reads keys made that way:
//     max 0.83, mean 0.38 on the H200 (issue 29 found the same size with an
//     independent float64 W8A8 emulation), against ~1.4 for an unrelated
//     row. Only NaN, infinities and gross errors fail (kOnBound, kOnMean);
//     a W8A8 reference is what can hold those paths tightly.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <numeric>
#include <random>
#include <string>

#include "backend/cuda/runtime/device_buffer.h"
#include "cuda_test_util.h"
#include "model/minimax_m2.h"
#include "model/weights.h"

namespace m2::test {
namespace {

struct Seq {
  std::vector<int32_t> tokens;  // prompt + generated
  std::vector<int32_t> table;   // blocks, grown as needed
  int64_t computed = 0;         // tokens in the cache
  int64_t target = 0;           // tokens to generate in total
};

// fp32 paths: a row within kOffBound, except rows whose history holds a
// flipped expert choice (float sums in another order decide a near-tie
// differently: ~15 % on the row, seen on the H200 in one row of ~30,000):
// at most kOffFlipRate of the rows, each within kOffFlipBound (an unrelated
// row is ~1.4); the mean over all rows within kOffMean.
constexpr double kOffBound = 1e-2, kOffMean = 2e-3, kOffFlipBound = 0.5, kOffFlipRate = 1e-3;
constexpr double kOnBound = 1.0, kOnMean = 0.45;     // default paths (W8A8 against W8A32)

struct MixCase {
  DType kv;
  bool fp8_paths;
};

class StepMix : public ::testing::TestWithParam<MixCase> {};

TEST_P(StepMix, RandomStepsMatchCpu) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device";
  const DType kv = GetParam().kv;
  const bool fp8_paths = GetParam().fp8_paths;
  const ModelConfig cfg = aligned_fp8_config(2, 16384);
  auto cw = make_dummy_weights(cfg, 7);
  auto gw = make_dummy_weights(cfg, 7);
  ASSERT_TRUE(cw.ok() && gw.ok());
  auto cpu = make_cpu_backend();
  auto gpu = make_cuda_backend(0, test_options(fp8_paths ? "" : "fp8_gemm=off,tc_attention=off"));
  ASSERT_TRUE(gpu);
  ASSERT_TRUE(cpu->prepare_weights(**cw).ok());
  ASSERT_TRUE(gpu->prepare_weights(**gw).ok());
  MiniMaxM2 cm(**cw, *cpu), gm(**gw, *gpu);
  const int bs = 16;
  const int64_t num_blocks = 6000;
  // The GPU's step scratch sized up front for the steps below (up to 8192
  // rows, ~610 sequences, one logit row each, contexts under 8400), as the
  // engine does: no op may allocate after this (checked at the end).
  StepLimits limits;
  limits.max_tokens = 8192, limits.max_seqs = 640, limits.max_logit_rows = 640, limits.max_context = 16384;
  limits.cache = gm.kv_shape(bs, num_blocks, kv);
  ASSERT_TRUE(gm.reserve(limits).ok());
  auto ccache = cm.make_kv_cache(bs, num_blocks, kv);
  auto gcache = gm.make_kv_cache(bs, num_blocks, kv);
  const uint64_t generation = cuda::memory_generation();
  const int64_t growths = cuda::scratch_growths_past_reserve();
  const int64_t V = cfg.vocab_size;

  std::mt19937_64 rng(kv == DType::kBF16 ? 29 : 290);
  auto uniform = [&](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); };
  std::vector<int32_t> free_blocks(num_blocks);
  std::iota(free_blocks.begin(), free_blocks.end(), 0);
  std::shuffle(free_blocks.begin(), free_blocks.end(), rng);
  auto release = [&](Seq& s) {
    free_blocks.insert(free_blocks.end(), s.table.begin(), s.table.end());
    s.table.clear();
    s.computed = 0;
  };

  std::vector<Seq> seqs;
  auto add_seq = [&](int64_t prompt) {
    Seq s;
    for (int64_t i = 0; i < prompt; ++i) s.tokens.push_back(static_cast<int32_t>(uniform(0, V - 1)));
    s.target = prompt + (uniform(0, 1) ? uniform(1, 40) : uniform(60, 120));
    seqs.push_back(std::move(s));
  };
  double worst = 0, sum = 0;
  int64_t rows = 0, outliers = 0, decode_only_steps = 0, mixed_steps = 0, preemptions = 0, max_t = 0;
  const int steps = 90;
  int64_t decode_batch = 1;
  for (int step = 0; step < steps; ++step) {
    // Phases: arrivals of many short prompts (decode batches up to ~520),
    // long odd prompts in big chunks, decode-only stretches.
    const int phase = (step / 15) % 3;
    if (phase == 0 && seqs.size() < 520)
      for (int i = 0; i < 90; ++i) add_seq(uniform(1, 40));
    if (phase == 1 && step % 5 == 0) add_seq(uniform(900, 8191));
    if (step % 11 == 7 && !seqs.empty()) {  // recompute preemption
      Seq& s = seqs[static_cast<size_t>(uniform(0, static_cast<int64_t>(seqs.size()) - 1))];
      release(s);
      ++preemptions;
    }
    // Decode-only steps of one batch size for the phase (while enough
    // sequences are ready): recorded once, then replayed over other
    // sequences, contexts and grown tables.
    const bool decode_only = phase == 2;
    if (step % 15 == 0) decode_batch = uniform(0, 1) ? uniform(1, 16) : uniform(17, 320);
    int64_t budget = decode_only ? decode_batch : uniform(64, 8192);
    StepInput in;
    std::vector<size_t> chunk_seq;
    for (size_t i = 0; i < seqs.size() && budget > 0; ++i) {
      Seq& s = seqs[i];
      const int64_t known = static_cast<int64_t>(s.tokens.size());
      const int64_t left = known - s.computed;
      if (left <= 0) continue;
      if (decode_only && left != 1) continue;
      const int64_t n = std::min<int64_t>(left, budget);
      const int64_t need = (s.computed + n + bs - 1) / bs;
      if (need - static_cast<int64_t>(s.table.size()) > static_cast<int64_t>(free_blocks.size())) continue;
      while (static_cast<int64_t>(s.table.size()) < need) {
        s.table.push_back(free_blocks.back());
        free_blocks.pop_back();
      }
      const int64_t row = static_cast<int64_t>(in.tokens.size());
      for (int64_t j = 0; j < n; ++j) {
        const int64_t pos = s.computed + j;
        in.tokens.push_back(s.tokens[static_cast<size_t>(pos)]);
        in.positions.push_back(static_cast<int32_t>(pos));
        in.slots.push_back(static_cast<int64_t>(s.table[static_cast<size_t>(pos / bs)]) * bs + pos % bs);
      }
      in.seqs.push_back({row, n, s.computed + n, s.table});
      in.logit_rows.push_back(row + n - 1);
      chunk_seq.push_back(i);
      budget -= n;
    }
    if (in.tokens.empty()) continue;
    const int64_t T = static_cast<int64_t>(in.tokens.size());
    max_t = std::max(max_t, T);
    bool all_decode = true;
    for (const SeqSlice& sl : in.seqs) all_decode = all_decode && sl.num_rows == 1;
    (all_decode ? decode_only_steps : mixed_steps) += 1;
    std::vector<float> cl, gl;
    ASSERT_TRUE(cm.forward(in, *ccache, &cl).ok()) << "step " << step;
    ASSERT_TRUE(gm.forward(in, *gcache, &gl).ok()) << "step " << step;
    for (size_t r = 0; r < chunk_seq.size(); ++r) {
      const std::vector<float> c(cl.begin() + r * V, cl.begin() + (r + 1) * V);
      const std::vector<float> g(gl.begin() + r * V, gl.begin() + (r + 1) * V);
      const double e = rel_error(g, c);
      worst = std::max(worst, e), sum += e, ++rows;
      if (!fp8_paths && e > kOffBound) {  // a routing flip (see the bounds above), or a bug
        ++outliers;
        std::printf("row over the bound: %.4f at step %d (T %lld) chunk %zu of %lld rows at context %lld\n", e, step,
                    static_cast<long long>(T), r, static_cast<long long>(in.seqs[r].num_rows),
                    static_cast<long long>(in.seqs[r].context_len));
      }
      ASSERT_LE(e, fp8_paths ? kOnBound : kOffFlipBound)
          << "step " << step << " (T " << T << ", " << in.seqs.size() << " sequences) chunk " << r << " of "
          << in.seqs[r].num_rows << " rows at context " << in.seqs[r].context_len;
      // The next token from the CPU's logits, so both backends see one history.
      Seq& s = seqs[chunk_seq[r]];
      s.computed += in.seqs[r].num_rows;
      if (s.computed == static_cast<int64_t>(s.tokens.size()) && static_cast<int64_t>(s.tokens.size()) < s.target)
        s.tokens.push_back(static_cast<int32_t>(std::max_element(c.begin(), c.end()) - c.begin()));
    }
    // Finished sequences give their blocks back.
    for (Seq& s : seqs)
      if (static_cast<int64_t>(s.tokens.size()) >= s.target && s.computed == static_cast<int64_t>(s.tokens.size()))
        release(s), s.target = 0;
    std::erase_if(seqs, [](const Seq& s) { return s.target == 0; });
  }
  std::printf("%s KV, %s paths: %lld mixed and %lld decode-only steps (largest %lld rows), %lld preemptions; "
              "relative logit error max %.4f, mean %.4f over %lld rows\n",
              std::string(dtype_name(kv)).c_str(), fp8_paths ? "default" : "fp32", static_cast<long long>(mixed_steps),
              static_cast<long long>(decode_only_steps), static_cast<long long>(max_t),
              static_cast<long long>(preemptions), worst, rows ? sum / rows : 0.0, static_cast<long long>(rows));
  EXPECT_LE(rows ? sum / rows : 0.0, fp8_paths ? kOnMean : kOffMean);
  EXPECT_LE(static_cast<double>(outliers), kOffFlipRate * static_cast<double>(rows))
      << outliers << " rows over " << kOffBound;
  EXPECT_GT(decode_only_steps, 10);
  EXPECT_GT(mixed_steps, 10);
  EXPECT_EQ(cuda::scratch_growths_past_reserve(), growths) << "a scratch buffer grew past its up-front size (logged)";
  EXPECT_EQ(cuda::memory_generation(), generation) << "device memory was allocated mid-run: the step graphs retired";
}

INSTANTIATE_TEST_SUITE_P(Kv, StepMix,
                         ::testing::Values(MixCase{DType::kBF16, false}, MixCase{DType::kF8E4M3, false},
                                           MixCase{DType::kBF16, true}, MixCase{DType::kF8E4M3, true}),
                         [](const auto& info) {
                           return std::string(info.param.kv == DType::kBF16 ? "bf16" : "fp8kv") +
                                  (info.param.fp8_paths ? "_default_paths" : "_fp32_paths");
                         });

}  // namespace
}  // namespace m2::test
