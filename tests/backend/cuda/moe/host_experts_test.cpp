// Experts in host memory (issue 22, moe/host_experts.h) against the experts
// on the GPU and against the CPU backend, on a small model whose matrices are
// multiples of 128 (so the FP8 tensor-core paths run):
//   - a host layer's MoE of a small step runs the CPU backend's own code on
//     the same bytes: bit-identical to the CPU backend's moe();
//   - of a large step it runs the GPU's kernels on a staged copy of the same
//     bytes: bit-identical to the experts-on-the-GPU backend;
//   - whole model: the prefill identical, the decode steps (CPU experts in
//     fp32 against the GPU's decode MoE, graphs recorded and replayed, or
//     eager under sync=on / graphs=off) with the same greedy ids and within
//     1e-4 relative (issue 22's bound) or half of what reordering the
//     attention's fp32 sums does to this model's logits, if more.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "../cuda_test_util.h"
#include "model/greedy.h"
#include "model/minimax_m2.h"
#include "model/weights.h"

namespace m2::test {
namespace {

cuda::CudaOptions offload_options(int layers) {
  cuda::CudaOptions o = test_options();
  o.cpu_moe_layers = layers;
  o.cpu_moe_max_tokens = 8;
  o.cpu_moe_threads = 4;
  return o;
}

struct Loaded {
  std::unique_ptr<ModelWeights> w;
  std::unique_ptr<Backend> b;
};

Loaded load(const ModelConfig& cfg, std::unique_ptr<Backend> b, uint64_t seed = 11) {
  Loaded l;
  auto w = make_dummy_weights(cfg, seed);
  EXPECT_TRUE(w.ok()) << w.status().message();
  l.w = std::move(*w);
  l.b = std::move(b);
  const Status s = l.b->prepare_weights(*l.w);
  EXPECT_TRUE(s.ok()) << s.message();
  return l;
}

double rel_l2(const float* a, const float* b, int64_t n) {
  double d = 0, r = 0;
  for (int64_t i = 0; i < n; ++i) d += (double(a[i]) - b[i]) * (double(a[i]) - b[i]), r += double(b[i]) * b[i];
  return std::sqrt(d / std::max(r, 1e-30));
}

class HostExpertsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device";
  }
};

// One layer's moe() on the host experts, for steps of T rows.
std::vector<float> moe_on(Backend& b, const LayerWeights& layer, const std::vector<float>& x,
                          const std::vector<int32_t>& ids, const std::vector<float>& wts, int64_t T, int64_t H, int k) {
  auto dx = b.allocate(x.size() * 4), dout = b.allocate(x.size() * 4), did = b.allocate(ids.size() * 4),
       dw = b.allocate(wts.size() * 4);
  b.copy_from_host(x.data(), dx.get(), x.size() * 4);
  b.copy_from_host(ids.data(), did.get(), ids.size() * 4);
  b.copy_from_host(wts.data(), dw.get(), wts.size() * 4);
  Routing r;
  r.expert_ids = static_cast<int32_t*>(did.get()), r.weights = static_cast<float*>(dw.get()), r.tokens = T, r.top_k = k;
  b.moe(Act{static_cast<float*>(dx.get()), T, H}, layer, r, Act{static_cast<float*>(dout.get()), T, H});
  std::vector<float> out(x.size());
  b.copy_to_host(dout.get(), out.data(), out.size() * 4);
  return out;
}

TEST_F(HostExpertsTest, OpMatchesTheCpuSmallAndTheGpuLarge) {
  const ModelConfig cfg = aligned_fp8_config(3, 4096);
  Loaded host = load(cfg, make_cuda_backend(0, offload_options(cuda::CudaOptions::kCpuMoeAll)));
  Loaded gpu = load(cfg, make_cuda_backend(0, test_options()));
  Loaded cpu = load(cfg, make_cpu_backend());
  const int64_t H = cfg.hidden_size;
  const int k = cfg.num_experts_per_tok;
  std::mt19937 rng(5);
  for (int64_t T : {1, 5, 8, 9, 40}) {  // <= 8: the CPU; above: staged to the GPU
    for (int layer : {0, 2}) {
      std::vector<float> x(T * H), wts(T * k);
      std::vector<int32_t> ids(T * k);
      std::normal_distribution<float> n(0, 1);
      for (float& v : x) v = n(rng);
      for (int64_t t = 0; t < T; ++t) {
        std::vector<int32_t> e(cfg.num_local_experts);
        for (int i = 0; i < cfg.num_local_experts; ++i) e[i] = i;
        std::shuffle(e.begin(), e.end(), rng);
        for (int j = 0; j < k; ++j) ids[t * k + j] = e[j], wts[t * k + j] = 0.25f + 0.1f * j;
      }
      const auto h = moe_on(*host.b, host.w->layers[layer], x, ids, wts, T, H, k);
      const auto& ref = T <= 8 ? moe_on(*cpu.b, cpu.w->layers[layer], x, ids, wts, T, H, k)
                               : moe_on(*gpu.b, gpu.w->layers[layer], x, ids, wts, T, H, k);
      int64_t differ = 0;
      for (size_t i = 0; i < h.size(); ++i) differ += std::memcmp(&h[i], &ref[i], 4) != 0;
      EXPECT_EQ(differ, 0) << "T=" << T << " layer " << layer << ": " << differ << " of " << h.size()
                           << " outputs differ from the " << (T <= 8 ? "CPU backend" : "GPU-resident experts");
    }
  }
}

// Two weight sets prepared on one backend: each layer's staged copy and CPU
// job belong to its own set (a stale staged layer of the other set would
// pass for it by layer number).
TEST_F(HostExpertsTest, TwoWeightSetsOnOneBackendKeepTheirOwnExperts) {
  const ModelConfig cfg = aligned_fp8_config(3, 4096);
  Loaded a = load(cfg, make_cuda_backend(0, offload_options(cuda::CudaOptions::kCpuMoeAll)), 11);
  auto wb = make_dummy_weights(cfg, 12);
  ASSERT_TRUE(wb.ok());
  ASSERT_TRUE(a.b->prepare_weights(**wb).ok());
  Loaded gpu_b = load(cfg, make_cuda_backend(0, test_options()), 12);
  Loaded cpu_b = load(cfg, make_cpu_backend(), 12);
  const int64_t H = cfg.hidden_size;
  const int k = cfg.num_experts_per_tok;
  std::mt19937 rng(9);
  for (int64_t T : {40, 3}) {
    std::vector<float> x(T * H), wts(T * k, 0.25f);
    std::vector<int32_t> ids(T * k);
    std::normal_distribution<float> n(0, 1);
    for (float& v : x) v = n(rng);
    for (int64_t t = 0; t < T; ++t)
      for (int j = 0; j < k; ++j) ids[t * k + j] = static_cast<int32_t>((t + 3 * j) % cfg.num_local_experts);
    for (int layer = 0; layer < cfg.num_hidden_layers; ++layer) {
      moe_on(*a.b, a.w->layers[layer], x, ids, wts, T, H, k);  // set A's layer in the staging / its CPU job
      const auto got = moe_on(*a.b, (*wb)->layers[layer], x, ids, wts, T, H, k);
      const auto want = T > 8 ? moe_on(*gpu_b.b, gpu_b.w->layers[layer], x, ids, wts, T, H, k)
                              : moe_on(*cpu_b.b, cpu_b.w->layers[layer], x, ids, wts, T, H, k);
      EXPECT_EQ(std::memcmp(got.data(), want.data(), got.size() * 4), 0) << "T=" << T << " layer " << layer;
    }
  }
}

// A weight update (Backend::update_weights) writes the host layers' pinned
// experts in place: afterwards both paths compute with the new experts (the
// staged copy of an old layer is not reused).
TEST_F(HostExpertsTest, AWeightUpdateRewritesTheHostExperts) {
  const ModelConfig cfg = aligned_fp8_config(3, 4096);
  Loaded a = load(cfg, make_cuda_backend(0, offload_options(cuda::CudaOptions::kCpuMoeAll)), 11);
  auto wb = make_dummy_weights(cfg, 12);
  ASSERT_TRUE(wb.ok());
  Loaded gpu_b = load(cfg, make_cuda_backend(0, test_options()), 12);
  Loaded cpu_b = load(cfg, make_cpu_backend(), 12);
  const int64_t H = cfg.hidden_size;
  const int k = cfg.num_experts_per_tok;
  std::mt19937 rng(4);
  std::vector<float> x(40 * H), wts(40 * k, 0.25f);
  std::vector<int32_t> ids(40 * k);
  std::normal_distribution<float> n(0, 1);
  for (float& v : x) v = n(rng);
  for (int64_t t = 0; t < 40; ++t)
    for (int j = 0; j < k; ++j) ids[t * k + j] = static_cast<int32_t>((t + 5 * j) % cfg.num_local_experts);
  moe_on(*a.b, a.w->layers[1], x, ids, wts, 40, H, k);  // layer 1 of the old set staged
  ASSERT_TRUE(a.b->update_weights(*a.w, **wb).ok());
  for (int64_t T : {40, 3}) {
    const std::vector<float> xt(x.begin(), x.begin() + T * H), wt(wts.begin(), wts.begin() + T * k);
    const std::vector<int32_t> it(ids.begin(), ids.begin() + T * k);
    for (int layer = 0; layer < cfg.num_hidden_layers; ++layer) {
      const auto got = moe_on(*a.b, (*wb)->layers[layer], xt, it, wt, T, H, k);
      const auto want = T > 8 ? moe_on(*gpu_b.b, gpu_b.w->layers[layer], xt, it, wt, T, H, k)
                              : moe_on(*cpu_b.b, cpu_b.w->layers[layer], xt, it, wt, T, H, k);
      EXPECT_EQ(std::memcmp(got.data(), want.data(), got.size() * 4), 0) << "T=" << T << " layer " << layer;
    }
  }
}

TEST_F(HostExpertsTest, WholeModelMatchesExpertsOnTheGpu) {
  const ModelConfig cfg = aligned_fp8_config(3, 4096);
  // What fp32 reassociation alone does to this model's decode logits: the
  // GPU-resident model replayed from graphs and run eagerly (the decode
  // attention splits its keys by the recorded bound or by the context: the
  // same sums in another order; one of the two is the run under test). This
  // random model magnifies such differences to ~7e-4 (s19 run 50).
  Loaded gpu = load(cfg, make_cuda_backend(0, test_options()));
  Loaded replayed = load(cfg, make_cuda_backend(0, test_options("sync=off,graphs=on")));
  Loaded eager = load(cfg, make_cuda_backend(0, test_options("graphs=off")));
  MiniMaxM2 mg(*gpu.w, *gpu.b), mr(*replayed.w, *replayed.b), me(*eager.w, *eager.b);
  std::mt19937 rng(3);
  std::vector<int32_t> prompt(40);
  for (int32_t& t : prompt) t = static_cast<int32_t>(rng() % cfg.vocab_size);
  const int64_t V = cfg.vocab_size;
  constexpr int kSteps = 24;
  // The GPU-resident run: its greedy tokens and logits, and the reassociation noise.
  SingleSequence sg(mg, 128, 16, DType::kBF16), sr(mr, 128, 16, DType::kBF16), se(me, 128, 16, DType::kBF16);
  std::vector<float> lg, lo;
  std::vector<std::vector<float>> gpu_logits;
  ASSERT_TRUE(sg.run(prompt, 0, true, mg, &lg).ok());
  ASSERT_TRUE(sr.run(prompt, 0, true, mr, &lo).ok());
  ASSERT_TRUE(se.run(prompt, 0, true, me, &lo).ok());
  const std::vector<float> gpu_prefill = lg;
  std::vector<int32_t> tokens;
  int32_t next = static_cast<int32_t>(std::max_element(lg.end() - V, lg.end()) - (lg.end() - V));
  double noise = 0;
  for (int step = 0; step < kSteps; ++step) {  // decode: recorded as a graph, then replayed
    const int32_t tok[1] = {next};
    tokens.push_back(next);
    ASSERT_TRUE(sg.run(tok, 40 + step, false, mg, &lg).ok());
    for (auto [s, m] : {std::pair{&sr, &mr}, std::pair{&se, &me}}) {
      ASSERT_TRUE(s->run(tok, 40 + step, false, *m, &lo).ok());
      noise = std::max(noise, rel_l2(lo.data(), lg.data(), V));
    }
    gpu_logits.push_back(lg);
    next = static_cast<int32_t>(std::max_element(lg.begin(), lg.end()) - lg.begin());
  }
  // The bound: 1e-4 (issue 22), or half of what reassociation alone does.
  const double bound = std::max(1e-4, noise / 2);
  for (int host_layers : {1, 2, 3}) {
    Loaded host = load(cfg, make_cuda_backend(0, offload_options(host_layers)));
    MiniMaxM2 mh(*host.w, *host.b);
    SingleSequence sh(mh, 128, 16, DType::kBF16);
    std::vector<float> lh;
    ASSERT_TRUE(sh.run(prompt, 0, true, mh, &lh).ok());
    ASSERT_EQ(lh.size(), gpu_prefill.size());
    EXPECT_EQ(std::memcmp(lh.data(), gpu_prefill.data(), lh.size() * 4), 0) << host_layers << " host layers: prefill differs";
    double worst = 0;
    for (int step = 0; step < kSteps; ++step) {
      const int32_t tok[1] = {tokens[step]};
      ASSERT_TRUE(sh.run(tok, 40 + step, false, mh, &lh).ok());
      const std::vector<float>& want = gpu_logits[step];
      worst = std::max(worst, rel_l2(lh.data(), want.data(), V));
      const auto ah = std::max_element(lh.begin(), lh.end()) - lh.begin();
      const auto ag = std::max_element(want.begin(), want.end()) - want.begin();
      EXPECT_EQ(ah, ag) << host_layers << " host layers, step " << step;
    }
    EXPECT_LE(worst, bound) << host_layers << " host layers: decode logits";
    std::printf("%d host layers: decode logits within %.2e (relative L2) of the GPU-resident experts; bound %.2e "
                "(graphs against eager alone: %.2e)\n",
                host_layers, worst, bound, noise);
  }
}
}  // namespace
}  // namespace m2::test
