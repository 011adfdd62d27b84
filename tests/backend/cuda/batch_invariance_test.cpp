// Batch invariance on the GPU (CudaOptions::batch_invariant, the flag
// --batch-invariant): a sequence's logits are bit-identical whatever else is
// in its steps, however its tokens are chunked and wherever it sits in the
// batch. On the aligned FP8 model (every matrix a multiple of 128: the FP8
// tensor-core GEMM and grouped MoE run at every step size) with a context of
// 1,380 tokens (three key splits of 512), one sequence's logits of every
// position computed in one step are the reference, and must be equal, bit for
// bit, when the same tokens are
//   - decoded one at a time (decode-only steps: CUDA graphs, recorded once and
//     replayed over growing block tables),
//   - prefilled in chunks of mixed sizes,
//   - prefilled in chunks beside 60 other sequences' chunks of random sizes,
//     the sequence first, in the middle or last of the step,
//   - decoded in all-decode steps of 61 sequences (graphs again, recorded at
//     64 rows: padded with copies of a row that write no KV);
// with an F32 KV cache (the general kernel, keys split at fixed positions) and
// BF16 and FP8 ones (the prefill kernel for every row). No scratch may grow past its
// up-front size (the invariant attention's partials are planned for).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <numeric>
#include <random>
#include <string>

#include "backend/cuda/runtime/device_buffer.h"
#include "cuda_test_util.h"
#include "model/minimax_m2.h"
#include "model/weights.h"

namespace m2::test {
namespace {

constexpr int kBlock = 16;

struct Seq {
  std::vector<int32_t> tokens;
  std::vector<int32_t> table;
  int64_t computed = 0;
};

class BatchInvariance : public ::testing::TestWithParam<DType> {
 protected:
  void SetUp() override {
    if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device";
    cfg_ = aligned_fp8_config(2, 4096);
    auto w = make_dummy_weights(cfg_, 11);
    ASSERT_TRUE(w.ok()) << w.status().message();
    weights_ = std::move(*w);
    gpu_ = make_cuda_backend(0, test_options("batch_invariant=on"));
    ASSERT_TRUE(gpu_);
    ASSERT_TRUE(gpu_->prepare_weights(*weights_).ok());
    model_ = std::make_unique<MiniMaxM2>(*weights_, *gpu_);
    StepLimits limits;
    limits.max_tokens = 2048, limits.max_seqs = 80, limits.max_logit_rows = 2048, limits.max_context = 4096;
    limits.cache = model_->kv_shape(kBlock, kBlocks, GetParam());
    ASSERT_TRUE(model_->reserve(limits).ok());
    free_.resize(kBlocks);
    std::iota(free_.begin(), free_.end(), 0);
    std::shuffle(free_.begin(), free_.end(), rng_);
  }

  // A new cache with every block free (shuffled).
  std::unique_ptr<KvCache> fresh_cache() {
    free_.resize(kBlocks);
    std::iota(free_.begin(), free_.end(), 0);
    std::shuffle(free_.begin(), free_.end(), rng_);
    return model_->make_kv_cache(kBlock, kBlocks, GetParam());
  }

  // One step: chunk i of the step is the next n[i] tokens of *seqs[i]. Returns
  // the logits of every row of `target`'s chunk (others: their last row).
  std::vector<float> step(KvCache& cache, const std::vector<std::pair<Seq*, int64_t>>& chunks, const Seq* target) {
    StepInput in;
    int64_t target_first = -1, target_rows = 0;
    std::vector<int64_t> logit_of;  // index in logits of each chunk's first logit row
    for (auto [s, n] : chunks) {
      const int64_t need = (s->computed + n + kBlock - 1) / kBlock;
      while (static_cast<int64_t>(s->table.size()) < need) {
        if (free_.empty()) {
          ADD_FAILURE() << "out of KV blocks";
          return {};
        }
        s->table.push_back(free_.back());
        free_.pop_back();
      }
      const int64_t row = static_cast<int64_t>(in.tokens.size());
      for (int64_t j = 0; j < n; ++j) {
        const int64_t pos = s->computed + j;
        in.tokens.push_back(s->tokens[static_cast<size_t>(pos)]);
        in.positions.push_back(static_cast<int32_t>(pos));
        in.slots.push_back(static_cast<int64_t>(s->table[static_cast<size_t>(pos / kBlock)]) * kBlock + pos % kBlock);
      }
      in.seqs.push_back({row, n, s->computed + n, s->table});
      if (s == target) {
        target_first = static_cast<int64_t>(in.logit_rows.size()), target_rows = n;
        for (int64_t j = 0; j < n; ++j) in.logit_rows.push_back(row + j);
      } else {
        in.logit_rows.push_back(row + n - 1);
      }
      s->computed += n;
    }
    std::vector<float> logits;
    const Status st = model_->forward(in, cache, &logits);
    EXPECT_TRUE(st.ok()) << st.message();
    const int64_t V = cfg_.vocab_size;
    if (target_first < 0 || !st.ok()) return {};
    return std::vector<float>(logits.begin() + target_first * V, logits.begin() + (target_first + target_rows) * V);
  }

  // Rows [first, first + got / V) of the reference, bit for bit.
  void expect_rows(const std::vector<float>& got, int64_t first, const std::string& what) {
    const int64_t V = cfg_.vocab_size;
    ASSERT_LE(first * V + static_cast<int64_t>(got.size()), static_cast<int64_t>(ref_.size())) << what;
    const float* want = ref_.data() + first * V;
    if (std::memcmp(got.data(), want, got.size() * sizeof(float)) == 0) return;
    size_t i = 0;
    while (std::memcmp(&got[i], &want[i], sizeof(float)) == 0) ++i;
    double worst = 0;
    for (size_t k = 0; k < got.size(); ++k) worst = std::max(worst, static_cast<double>(std::abs(got[k] - want[k])));
    FAIL() << what << ": position " << first + static_cast<int64_t>(i) / V << " differs from the same position "
           << "computed alone in one step (logit " << i % V << ": " << got[i] << " vs " << want[i]
           << "; max |difference| over the chunk " << worst << ")";
  }

  static constexpr int64_t kBlocks = 4096, kLen = 1380, kPrompt = 1300;
  ModelConfig cfg_;
  std::unique_ptr<ModelWeights> weights_;
  std::unique_ptr<Backend> gpu_;
  std::unique_ptr<MiniMaxM2> model_;
  std::mt19937_64 rng_{2912};
  std::vector<int32_t> free_;
  std::vector<float> ref_;  // [kLen, V]: the target alone, every position in one step
};

TEST_P(BatchInvariance, ASequencesLogitsDoNotDependOnItsSteps) {
  const int64_t V = cfg_.vocab_size;
  auto uniform = [&](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng_); };
  Seq proto;
  for (int64_t i = 0; i < kLen; ++i) proto.tokens.push_back(static_cast<int32_t>(uniform(0, V - 1)));
  const int64_t growths = cuda::scratch_growths_past_reserve();
  {
    auto cache = fresh_cache();
    Seq t = proto;
    ref_ = step(*cache, {{&t, kLen}}, &t);
    ASSERT_EQ(static_cast<int64_t>(ref_.size()), kLen * V);
  }
  {  // decoded one token at a time (after one first token: every step is decode-only)
    auto cache = fresh_cache();
    Seq t = proto;
    for (int64_t p = 0; p < kLen; ++p) {
      expect_rows(step(*cache, {{&t, 1}}, &t), p, "alone, one token a step");
      if (HasFailure()) return;
    }
  }
  {  // chunks of mixed sizes, alone
    auto cache = fresh_cache();
    Seq t = proto;
    for (int64_t n : {7, 500, 13, 1, 1, 600, 64, 194}) {
      const int64_t at = t.computed;
      expect_rows(step(*cache, {{&t, n}}, &t), at, "alone, chunks of mixed sizes");
      if (HasFailure()) return;
    }
    ASSERT_EQ(t.computed, kLen);
  }
  {  // beside 60 other sequences: their chunks of random sizes, then all-decode steps of 61 (padded to 64)
    auto cache = fresh_cache();
    Seq t = proto;
    constexpr int64_t kTail = 100;  // the others' last tokens, decoded one a step
    std::vector<Seq> others(60);
    for (Seq& o : others)
      for (int64_t i = 0, n = uniform(1, 600) + kTail; i < n; ++i)
        o.tokens.push_back(static_cast<int32_t>(uniform(0, V - 1)));
    int step_no = 0;
    int64_t decode_steps = 0;
    while (t.computed < kLen) {
      const bool decode = t.computed >= kPrompt;
      const int64_t n =
          decode ? 1 : std::min<int64_t>(kPrompt - t.computed, uniform(0, 2) ? uniform(1, 200) : uniform(200, 700));
      std::vector<std::pair<Seq*, int64_t>> chunks;
      int64_t budget = 2048 - n;
      for (Seq& o : others) {
        const int64_t left = static_cast<int64_t>(o.tokens.size()) - o.computed;
        if (left <= 0) continue;
        // Prompt chunks of 1-40 (up to 64 once the sequence decodes, to catch up), then one token a step.
        const int64_t m = left > kTail ? std::min<int64_t>(left - kTail, decode ? 64 : uniform(1, 40)) : 1;
        if (m > budget) continue;
        chunks.push_back({&o, m});
        budget -= m;
      }
      const size_t place = step_no % 3 == 0 ? 0 : step_no % 3 == 1 ? chunks.size() / 2 : chunks.size();
      chunks.insert(chunks.begin() + static_cast<std::ptrdiff_t>(place), {&t, n});
      bool all_decode = true;
      for (auto [s, k] : chunks) all_decode = all_decode && k == 1;
      decode_steps += all_decode && chunks.size() == 61;
      const int64_t at = t.computed;
      expect_rows(step(*cache, chunks, &t), at,
                  "step " + std::to_string(step_no) + " of " + std::to_string(chunks.size()) + " sequences, " +
                      std::to_string(n) + " rows of the sequence at place " + std::to_string(place));
      if (HasFailure()) return;
      ++step_no;
    }
    std::printf("%s KV: %d steps beside up to 60 others (%lld all-decode of 61), every position bit-identical\n",
                std::string(dtype_name(GetParam())).c_str(), step_no, static_cast<long long>(decode_steps));
    EXPECT_GE(decode_steps, 40) << "the decode phase should run all-decode steps of 61 (recorded as graphs)";
    EXPECT_EQ(gpu_->graph_rows(61), 64) << "steps of 61 should run padded";
  }
  EXPECT_EQ(cuda::scratch_growths_past_reserve(), growths) << "a scratch buffer grew past its up-front size (logged)";
}

INSTANTIATE_TEST_SUITE_P(Kv, BatchInvariance, ::testing::Values(DType::kF32, DType::kBF16, DType::kF8E4M3),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

}  // namespace
}  // namespace m2::test
