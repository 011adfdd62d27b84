// The whole MiniMax-M2 forward pass on the GPU at a context the CPU cannot
// prefill in a test's time (32K tokens), against the CPU backend. The
// reference tests of the whole model (float64 logits, greedy ids, chunked and
// batched steps, KV dtypes) are written once for every backend:
// tests/model/reference_test.cpp.
#include <gtest/gtest.h>

#include <numeric>

#include "backend/cuda/cuda_backend.h"
#include "cuda_test_util.h"
#include "io/npy.h"
#include "model/greedy.h"
#include "model/minimax_m2.h"
#include "util/json.h"

namespace m2::test {
namespace {

// A 32K-token context on the tiny FP8 model. The GPU prefills 32K tokens in
// chunks; its cache is copied to the CPU backend (the CPU's own O(T²)
// prefill would take minutes), then both run a last 256-token chunk (causal
// attention over 32K keys) and 4 decode steps (split over the keys) and must
// agree.
TEST(CudaModelLongContext, ThirtyTwoThousandTokensMatchCpuBackend) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device";
  auto w = load_model(data_path("m2-tiny-fp8"), LoadOptions{});
  ASSERT_TRUE(w.ok());
  auto gpu = make_cuda_backend(0, test_options());
  ASSERT_TRUE(gpu && gpu->prepare_weights(**w).ok());
  auto cpu = make_cpu_backend();
  MiniMaxM2 gm(**w, *gpu), cm(**w, *cpu);
  const int64_t context = 32768, last_chunk = 256, chunk = 4096, decode = 4, bs = 16;
  const int64_t V = gm.config().vocab_size;
  const int64_t blocks = (context + decode + bs - 1) / bs;
  auto gcache = gm.make_kv_cache(bs, blocks, DType::kBF16);
  auto ccache = cm.make_kv_cache(bs, blocks, DType::kBF16);
  std::vector<int32_t> table(blocks);
  std::iota(table.rbegin(), table.rend(), 0);  // pages in reverse order
  std::mt19937 rng(5);
  auto input = [&](const std::vector<int32_t>& toks, int64_t pos, int64_t want_rows) {
    StepInput in;
    const int64_t n = static_cast<int64_t>(toks.size());
    in.tokens = toks;
    for (int64_t i = 0; i < n; ++i) {
      const int64_t p = pos + i;
      in.positions.push_back(static_cast<int32_t>(p));
      in.slots.push_back(static_cast<int64_t>(table[p / bs]) * bs + p % bs);
    }
    for (int64_t i = n - want_rows; i < n; ++i) in.logit_rows.push_back(i);
    in.seqs.push_back({0, n, pos + n, table});
    return in;
  };
  auto random_tokens = [&](int64_t n) {
    std::vector<int32_t> t(n);
    for (auto& x : t) x = static_cast<int32_t>(rng() % V);
    return t;
  };
  std::vector<float> gl, cl;
  for (int64_t p = 0; p < context - last_chunk; p += chunk) {
    const int64_t n = std::min(chunk, context - last_chunk - p);
    ASSERT_TRUE(gm.forward(input(random_tokens(n), p, 1), *gcache, &gl).ok());
  }
  gpu->copy_to_host(gcache->k_base(0), ccache->k_base(0), KvCache::storage_bytes(gcache->shape()));
  // The last chunk, then greedy decode steps, on both backends.
  StepInput in = input(random_tokens(last_chunk), context - last_chunk, 8);
  ASSERT_TRUE(gm.forward(in, *gcache, &gl).ok());
  ASSERT_TRUE(cm.forward(in, *ccache, &cl).ok());
  const double prefill_diff = max_abs_diff(gl, cl);
  EXPECT_LE(prefill_diff, 5e-3) << "last prefill rows";
  double decode_diff = 0;
  for (int64_t i = 0; i < decode; ++i) {
    const int32_t next = static_cast<int32_t>(std::max_element(gl.end() - V, gl.end()) - (gl.end() - V));
    StepInput d = input({next}, context + i, 1);
    ASSERT_TRUE(gm.forward(d, *gcache, &gl).ok());
    ASSERT_TRUE(cm.forward(d, *ccache, &cl).ok());
    decode_diff = std::max(decode_diff, max_abs_diff(gl, cl));
  }
  EXPECT_LE(decode_diff, 5e-3) << "decode steps";
  std::printf("32K context: max |GPU - CPU| = %.3g over the last 8 prefill rows, %.3g over %lld decode steps\n",
              prefill_diff, decode_diff, static_cast<long long>(decode));
}

}  // namespace
}  // namespace m2::test
