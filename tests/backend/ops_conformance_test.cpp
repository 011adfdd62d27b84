// The op conformance suite (llama.cpp's test-backend-ops): every Backend op
// of every backend other than the CPU, with each kernel variant its plans can
// choose (backend_cases.h: device_cases()), against the CPU backend's op (the
// reference, itself tested against the math), at the M2 shapes and more, in
// every stored dtype, on fresh random inputs, with outputs poisoned (NaN)
// beforehand. Bounds:
//   - gathers, embedding, add, KV stores: exact (no arithmetic, or the same
//     RNE conversion);
//   - RMSNorm and QK norm + RoPE: both sides use fp64 statistics and angles
//     and round (x * inv) * w identically, so ~1 ulp (1e-6 relative);
//   - matmul, attention, router, MoE: fp32 accumulation in another order;
//     the error of a K-term fp32 dot product is ~sqrt(K) * 2^-24 relative
//     (~5e-6 at K = 6144), bound 2e-5 (BF16 matmuls of 17+ tokens add the
//     bf16 hi + lo split of x, <= 2^-17 relative: cuda_bf16_gemm_test.cpp);
//     except attention steps with a sequence on a bf16 tensor-core prefill
//     kernel (bf16 Q and P, bound 4 * 2^-9; the CUDA one is tested per
//     vector in tests/backend/cuda/attention/attention_test.cpp).
#include <algorithm>
#include <cmath>
#include <limits>
#include <cstring>
#include <numeric>

#include "backend_cases.h"
#include "backend_test_util.h"
#include "model/weights.h"

namespace m2::test {
namespace {

// A paged cache filled through kv_store on both backends, then attention
// over a mix of decode rows (long contexts, split over the keys) and prefill
// chunks (causal), with scrambled block tables.
struct AttnCase {
  int heads, kv_heads, hd, block_size;
  DType dtype;
  std::vector<std::pair<int64_t, int64_t>> seqs;  // (context, new rows)
};

class Ops : public ::testing::TestWithParam<BackendCase>, public DeviceVsCpu {
 protected:
  void SetUp() override {
    if (!GetParam().available()) GTEST_SKIP() << "no " << GetParam().name << " device";
    dev_ = GetParam().make();
    ASSERT_TRUE(dev_) << GetParam().name << " did not start";
    cpu_ = make_cpu_backend();
  }
  void check_attention(const AttnCase& c, HostTensors& h);
  void check_route_ties(int64_t T);
};

TEST_P(Ops, EmbedAndGatherAreExact) {
  HostTensors h(1);
  for (DType dt : {DType::kBF16, DType::kF32}) {
    const int64_t V = 1000, H = 3072;
    ModelWeights w;
    w.embed = h.store(h.randn(V * H), dt, Shape{V, H});
    prepare(w);
    std::vector<int32_t> ids = {5, 999, 0, 5, 123, 777, 1};
    Act out = poisoned(7, H);
    dev_->embed(w.embed, ids, 0, out);
    std::vector<float> want(7 * H);
    cpu_->embed(w.embed, ids, 0, host_act(want, 7));
    EXPECT_EQ(to_host(out), want) << dtype_name(dt);
    // A tensor-parallel rank's share of the vocabulary, rows [200, 700) of
    // the table: its ids' rows, zeros for the others' (999, 0, 5, 123, 1).
    ModelWeights part;
    part.embed = w.embed;
    part.embed.data = static_cast<const uint8_t*>(w.embed.data) + 200 * H * dtype_size(dt);
    part.embed.shape = Shape{500, H};
    part.embed.prepared = nullptr;
    prepare(part);
    Act pout = poisoned(7, H);
    dev_->embed(part.embed, ids, 200, pout);
    std::vector<float> want_part(7 * H, 0.0f);
    for (size_t i = 0; i < ids.size(); ++i)
      if (ids[i] >= 200 && ids[i] < 700) std::copy_n(want.begin() + i * H, H, want_part.begin() + i * H);
    std::vector<float> cpu_part(7 * H, -1.0f);
    cpu_->embed(part.embed, ids, 200, host_act(cpu_part, 7));
    EXPECT_EQ(cpu_part, want_part) << dtype_name(dt);
    EXPECT_EQ(to_host(pout), want_part) << dtype_name(dt);

    const std::vector<int64_t> rows = {6, 0, 3};
    Act sel = poisoned(3, H);
    dev_->gather_rows(out, rows, sel);
    std::vector<float> want_sel(3 * H);
    cpu_->gather_rows(host_act(want, 7), rows, host_act(want_sel, 3));
    EXPECT_EQ(to_host(sel), want_sel);
  }
}

TEST_P(Ops, AddIsExact) {
  HostTensors h(2);
  auto x = h.randn(5 * 3072), y = h.randn(5 * 3072);
  Act gx = to_dev(x, 5), gy = to_dev(y, 5);
  dev_->add(gx, gy);
  cpu_->add(host_act(x, 5), host_act(y, 5));
  EXPECT_EQ(to_host(gx), x);
}

TEST_P(Ops, RmsNormMatchesCpu) {
  HostTensors h(3);
  for (int64_t n : {3072, 6144, 192}) {
    for (int64_t T : {1, 7}) {
      ModelWeights w;
      auto wv = h.randn(n, 0.2f);
      for (float& v : wv) v += 1.0f;  // norm weights around 1
      w.final_norm = h.store(wv, DType::kBF16, Shape{n});
      prepare(w);
      auto x = h.randn(T * n, 3.0f);
      Act gx = to_dev(x, T), out = poisoned(T, n);
      dev_->rms_norm(gx, w.final_norm, 1e-6f, out);
      std::vector<float> want(T * n);
      cpu_->rms_norm(host_act(x, T), w.final_norm, 1e-6f, host_act(want, T));
      EXPECT_LE(rel_error(to_host(out), want), 1e-6) << "n " << n << " T " << T;
      dev_->rms_norm(gx, w.final_norm, 1e-6f, gx);  // in place
      EXPECT_LE(rel_error(to_host(gx), want), 1e-6) << "in place, n " << n;
    }
  }
}

struct MatmulCase {
  DType dtype;
  int64_t N, K;
  std::vector<int64_t> tokens;
};

TEST_P(Ops, MatmulMatchesCpuForEveryDtypeAndTokenCount) {
  HostTensors h(4);
  const std::vector<MatmulCase> cases = {
      {DType::kF8E4M3, 6144, 3072, {1, 2, 4, 16}},  // q_proj: GEMV (more tokens: FP8 GEMM, cuda_fp8_gemm_test)
      {DType::kF8E4M3, 1024, 3072, {1, 5}},                 // k/v_proj: several warps per row
      {DType::kF8E4M3, 3072, 6144, {1, 3}},                 // o_proj
      {DType::kBF16, 4096, 3072, {1, 4, 33}},               // lm_head-like
      {DType::kF16, 512, 192, {1, 6, 40}},
      {DType::kF32, 256, 3072, {1, 4, 20}},
      {DType::kF8E4M3, 96, 192, {1, 3, 7, 300}},            // tiny model: partial scale blocks
      {DType::kBF16, 256, 192, {1, 9, 300}},
      {DType::kF8E4M3, 200, 100, {1, 3, 70}},               // rows not in 16-byte chunks: tiled path
  };
  for (const MatmulCase& c : cases) {
    ModelWeights w;
    w.lm_head = h.linear(c.dtype, c.N, c.K);
    prepare(w);
    for (int64_t T : c.tokens) {
      auto x = h.randn(T * c.K);
      Act gx = to_dev(x, T), gy = poisoned(T, c.N);
      dev_->matmul(gx, w.lm_head, gy);
      std::vector<float> want(T * c.N);
      cpu_->matmul(host_act(x, T), w.lm_head, host_act(want, T));
      EXPECT_LE(rel_error(to_host(gy), want), 2e-5)
          << dtype_name(c.dtype) << " [" << c.N << ", " << c.K << "] T=" << T;
    }
  }
}

// FP8 decode products on tensor cores take the activations as f16 hi + lo
// after a power-of-two scaling per token (gemv_mma.cuh): fp32 accuracy for
// any activation magnitude, no overflow of f16's range, zero rows exact.
TEST_P(Ops, Fp8GemvKeepsFp32AccuracyOverTheActivationRange) {
  HostTensors h(12);
  const int64_t N = 1024, K = 3072, T = 5;
  ModelWeights w;
  w.lm_head = h.linear(DType::kF8E4M3, N, K);
  prepare(w);
  std::vector<float> x = h.randn(T * K);
  std::uniform_int_distribution<int> exponent(-20, 20);
  for (int64_t k = 0; k < K; ++k) {
    x[k] = std::ldexp(x[k], exponent(h.rng()));  // token 0: 2^-20 .. 2^20 within the row
    x[K + k] *= 1e-30f;                          // token 1: tiny
    x[2 * K + k] *= 1e30f;                       // token 2: huge (f16 alone would overflow)
    x[3 * K + k] = 0.0f;                         // token 3: zero
  }
  x[4 * K + 17] = 65504.0f * 8;  // token 4: one element beyond f16's range
  Act gx = to_dev(x, T), gy = poisoned(T, N);
  dev_->matmul(gx, w.lm_head, gy);
  std::vector<float> want(T * N);
  cpu_->matmul(host_act(x, T), w.lm_head, host_act(want, T));
  const auto got = to_host(gy);
  for (int64_t t = 0; t < T; ++t) {
    const std::vector<float> g(got.begin() + t * N, got.begin() + (t + 1) * N);
    const std::vector<float> c(want.begin() + t * N, want.begin() + (t + 1) * N);
    if (t == 3) {
      EXPECT_TRUE(std::all_of(g.begin(), g.end(), [](float v) { return v == 0.0f; })) << "zero row";
    } else {
      EXPECT_LE(rel_error(g, c), 2e-5) << "token " << t;
    }
  }
}

// A token's result is a function of its own row only: the same whatever
// else shares the launch, for every token count of the GEMV path.
TEST_P(Ops, MatmulGemvIsBatchInvariant) {
  HostTensors h(5);
  ModelWeights w;
  w.lm_head = h.linear(DType::kF8E4M3, 6144, 3072);
  prepare(w);
  auto x = h.randn(16 * 3072);
  Act gx = to_dev(x, 16), all = poisoned(16, 6144), one = poisoned(1, 6144);
  dev_->matmul(gx, w.lm_head, all);
  const auto batched = to_host(all);
  for (int64_t t : {0, 5, 15}) {
    dev_->matmul(gx.rows_slice(t, t + 1), w.lm_head, one);
    const auto alone = to_host(one);
    EXPECT_TRUE(std::equal(alone.begin(), alone.end(), batched.begin() + t * 6144)) << "token " << t;
  }
}

TEST_P(Ops, QkNormRopeMatchesCpu) {
  HostTensors h(6);
  struct Case { int heads, kv_heads, hd, rot; bool norm; };
  for (const Case& c : {Case{48, 8, 128, 64, true}, Case{4, 2, 64, 32, true}, Case{48, 8, 128, 64, false}}) {
    ModelWeights w;
    w.layers.resize(1);
    if (c.norm) {
      w.layers[0].q_norm = h.store(h.randn(c.heads * c.hd, 0.2f), DType::kBF16, Shape{c.heads * c.hd});
      w.layers[0].k_norm = h.store(h.randn(c.kv_heads * c.hd, 0.2f), DType::kBF16, Shape{c.kv_heads * c.hd});
    }
    prepare(w);
    // 6 tokens (1024 threads a token), then 200 (the wide kernel, 256).
    for (const int64_t T : {6, 200}) {
      std::vector<int32_t> pos = {0, 1, 17, 300, 4095, 200000};
      for (int64_t i = 6; i < T; ++i) pos.push_back(static_cast<int32_t>(i * 7919 % 250000));
      auto q = h.randn(T * c.heads * c.hd, 2.0f), k = h.randn(T * c.kv_heads * c.hd, 2.0f);
      Act gq = to_dev(q, T), gk = to_dev(k, T);
      const RopeParams rope{c.hd, c.rot, 5e6};
      dev_->qk_norm_rope(gq, gk, w.layers[0].q_norm, w.layers[0].k_norm, 1e-6f, pos, rope);
      cpu_->qk_norm_rope(host_act(q, T), host_act(k, T), w.layers[0].q_norm, w.layers[0].k_norm, 1e-6f, pos, rope);
      EXPECT_LE(rel_error(to_host(gq), q), 1e-6) << "q, head_dim " << c.hd << " norm " << c.norm << " T " << T;
      EXPECT_LE(rel_error(to_host(gk), k), 1e-6) << "k, head_dim " << c.hd << " norm " << c.norm << " T " << T;
    }
  }
}

void Ops::check_attention(const AttnCase& c, HostTensors& h) {
  Backend& gpu = *dev_;
  Backend& cpu = *cpu_;
  const PagedKv kv = paged_kv(h, c.kv_heads, c.hd, c.block_size, c.dtype, c.seqs);
  const KvCacheShape& shape = kv.shape;
  const KvCache &gcache = kv.gpu, &ccache = kv.cpu;
  const std::vector<SeqSlice>& slices = kv.slices;
  const int64_t rows = kv.rows;
  // The caches (K then V of the one layer) agree exactly (same RNE conversion).
  std::vector<uint8_t> gbytes(KvCache::storage_bytes(shape));
  gpu.copy_to_host(gcache.k_base(0), gbytes.data(), gbytes.size());
  EXPECT_EQ(0, std::memcmp(gbytes.data(), ccache.k_base(0), gbytes.size())) << "kv_store differs";

  auto q = h.randn(rows * c.heads * c.hd);
  Act out = poisoned(rows, c.heads * c.hd);
  const float scale = 1.0f / std::sqrt(float(c.hd));
  gpu.attention(to_dev(q, rows), gcache, 0, slices, c.heads, scale, out);
  std::vector<float> want(rows * c.heads * c.hd);
  cpu.attention(host_act(q, rows), ccache, 0, slices, c.heads, scale, host_act(want, rows));
  bool tensor_cores = false;
  for (auto [ctx, n] : c.seqs)
    tensor_cores |= GetParam().bf16_prefill_attention(c.dtype, c.hd) && n >= 16;
  EXPECT_LE(rel_error(to_host(out), want), tensor_cores ? 4.0 / 512 : 2e-5)
      << dtype_name(c.dtype) << " heads " << c.heads << "/" << c.kv_heads << " hd " << c.hd
      << (tensor_cores ? " (bf16 tensor-core prefill)" : "");
}

TEST_P(Ops, AttentionMatchesCpu) {
  HostTensors h(7);
  const std::vector<AttnCase> cases = {
      // M2 shapes: decode rows at 1K and 3000 (split over keys), a prefill chunk after 500 cached tokens.
      {48, 8, 128, 16, DType::kBF16, {{1024, 1}, {3000, 1}, {700, 200}, {5, 5}}},
      {48, 8, 128, 16, DType::kF32, {{1024, 1}, {37, 37}}},
      // Tiny-model shapes: GQA 2:1, head_dim 64, 4-token blocks.
      {4, 2, 64, 4, DType::kF32, {{12, 3}, {5, 5}, {333, 1}}},
      {4, 2, 64, 4, DType::kBF16, {{90, 90}}},
  };
  for (const AttnCase& c : cases) check_attention(c, h);
}

// Long context: decode rows and a prefill chunk at the end of 32K tokens.
TEST_P(Ops, AttentionAt32KContextMatchesCpu) {
  HostTensors h(8);
  check_attention({48, 8, 128, 16, DType::kBF16, {{32768, 1}, {32800, 64}}}, h);
}

// The router against a float64 evaluation of the spec: the GPU's experts are
// a valid top-k of the biased scores (up to near-ties below the fp32
// rounding of the logits) and their weights are the renormalised unbiased
// scores.
TEST_P(Ops, RouteSelectsTopKOfBiasedScoresAndWeighsUnbiased) {
  HostTensors h(9);
  const int64_t E = 256, H = 3072;
  const int k = 8;
  ModelWeights w;
  w.layers.resize(1);
  auto gate = h.randn(E * H, 1.0f / std::sqrt(float(H)));
  std::vector<float> bias(E);
  for (float& b : bias) b = std::uniform_real_distribution<float>(-0.05f, 0.05f)(h.rng());
  w.layers[0].router = h.store(gate, DType::kF32, Shape{E, H});
  w.layers[0].router_bias = h.store(bias, DType::kF32, Shape{E});
  prepare(w);
  for (int64_t T : {1, 3, 4, 5, 64, 300}) {
    auto x = h.randn(T * H);
    int32_t* ids = dev_array(std::vector<int32_t>(T * k, -1));
    float* wts = dev_array(std::vector<float>(T * k, std::numeric_limits<float>::quiet_NaN()));
    dev_->route(to_dev(x, T), w.layers[0].router, w.layers[0].router_bias, k, 1.0f, Routing{ids, wts, T, k});
    const auto got_ids = to_host(ids, T * k);
    const auto got_w = to_host(wts, T * k);
    std::vector<int32_t> cpu_ids(T * k);
    std::vector<float> cpu_w(T * k);
    cpu_->route(host_act(x, T), w.layers[0].router, w.layers[0].router_bias, k, 1.0f,
                Routing{cpu_ids.data(), cpu_w.data(), T, k});
    int64_t same = 0;
    for (int64_t t = 0; t < T; ++t) {
      std::vector<double> s(E), biased(E);
      for (int64_t e = 0; e < E; ++e) {
        double l = 0;
        for (int64_t j = 0; j < H; ++j) l += double(x[t * H + j]) * gate[e * H + j];
        s[e] = 1.0 / (1.0 + std::exp(-l));
        biased[e] = s[e] + bias[e];
      }
      std::vector<double> sorted = biased;
      std::nth_element(sorted.begin(), sorted.begin() + (k - 1), sorted.end(), std::greater<>());
      const double kth = sorted[k - 1];
      double sum = 0;
      for (int j = 0; j < k; ++j) sum += s[got_ids[t * k + j]];
      for (int j = 0; j < k; ++j) {
        const int32_t e = got_ids[t * k + j];
        ASSERT_TRUE(e >= 0 && e < E) << "token " << t;
        EXPECT_GE(biased[e], kth - 1e-5) << "token " << t << " slot " << j;
        EXPECT_NEAR(got_w[t * k + j], s[e] / sum, 1e-6) << "token " << t << " slot " << j;
      }
      for (int j = 1; j < k; ++j)  // in selection order
        EXPECT_GE(biased[got_ids[t * k + j - 1]], biased[got_ids[t * k + j]] - 1e-5) << "token " << t;
      std::vector<int32_t> a(got_ids.begin() + t * k, got_ids.begin() + (t + 1) * k);
      std::vector<int32_t> b(cpu_ids.begin() + t * k, cpu_ids.begin() + (t + 1) * k);
      std::sort(a.begin(), a.end()), std::sort(b.begin(), b.end());
      same += a == b;
    }
    // The logits differ from the CPU's by fp32 rounding (~1e-6): only a near-tie at the k-th place may differ.
    EXPECT_GE(same, T - 1) << "tokens whose expert set differs from the CPU backend's";
  }
}

// Routing replay: forced rows take the given experts, weighted by their
// unbiased sigmoid scores renormalised over them (float64 of the same
// logits), and match the CPU backend's; rows not forced are routed as route().
TEST_P(Ops, RouteForcedTakesTheGivenExpertsWeighedByTheirScores) {
  if (!dev_->supports_routing_replay()) GTEST_SKIP() << "no routing replay on " << dev_->name();
  HostTensors h(11);
  const int64_t E = 256, H = 3072;
  const int k = 8;
  ModelWeights w;
  w.layers.resize(1);
  auto gate = h.randn(E * H, 1.0f / std::sqrt(float(H)));
  w.layers[0].router = h.store(gate, DType::kF32, Shape{E, H});
  w.layers[0].router_bias = h.store(std::vector<float>(E, 0.01f), DType::kF32, Shape{E});
  prepare(w);
  for (int64_t T : {1, 5, 40}) {
    auto x = h.randn(T * H);
    std::vector<int32_t> forced(T * k);
    for (int64_t t = 0; t < T; ++t)
      for (int j = 0; j < k; ++j) forced[t * k + j] = t % 3 == 1 ? -1 : static_cast<int32_t>((t * 37 + j * 29) % E);
    int32_t* ids = dev_array(std::vector<int32_t>(T * k, -1));
    float* wts = dev_array(std::vector<float>(T * k, 0.0f));
    dev_->route_forced(to_dev(x, T), w.layers[0].router, w.layers[0].router_bias, k, 2.5f, forced,
                       Routing{ids, wts, T, k});
    const auto got_ids = to_host(ids, T * k);
    const auto got_w = to_host(wts, T * k);
    std::vector<int32_t> cpu_ids(T * k);
    std::vector<float> cpu_w(T * k);
    cpu_->route_forced(host_act(x, T), w.layers[0].router, w.layers[0].router_bias, k, 2.5f, forced,
                       Routing{cpu_ids.data(), cpu_w.data(), T, k});
    for (int64_t t = 0; t < T; ++t) {
      if (forced[t * k] < 0) continue;  // routed: route()'s test holds those
      double sum = 0;
      std::vector<double> s(k);
      for (int j = 0; j < k; ++j) {
        double l = 0;
        for (int64_t i = 0; i < H; ++i) l += double(x[t * H + i]) * gate[forced[t * k + j] * H + i];
        s[j] = 1.0 / (1.0 + std::exp(-l));
        sum += s[j];
      }
      for (int j = 0; j < k; ++j) {
        EXPECT_EQ(got_ids[t * k + j], forced[t * k + j]) << "token " << t;
        EXPECT_EQ(cpu_ids[t * k + j], forced[t * k + j]) << "token " << t;
        EXPECT_NEAR(got_w[t * k + j], s[j] / sum * 2.5, 1e-6) << "token " << t << " slot " << j;
        EXPECT_NEAR(got_w[t * k + j], cpu_w[t * k + j], 1e-6) << "token " << t << " slot " << j;
      }
    }
  }
}

TEST_P(Ops, RouteBreaksTiesTowardLowerExpertId) {
  HostTensors h(10);
  const int64_t E = 40, H = 64;
  ModelWeights w;
  w.layers.resize(1);
  w.layers[0].router = h.store(std::vector<float>(E * H, 0.0f), DType::kF32, Shape{E, H});  // all scores 0.5
  prepare(w);
  int32_t* ids = dev_array(std::vector<int32_t>(3, -1));
  float* wts = dev_array(std::vector<float>(3, 0.0f));
  dev_->route(to_dev(h.randn(H), 1), w.layers[0].router, TensorView{}, 3, 1.0f, Routing{ids, wts, 1, 3});
  EXPECT_EQ(to_host(ids, 3), (std::vector<int32_t>{0, 1, 2}));
  EXPECT_FLOAT_EQ(to_host(wts, 3)[0], 1.0f / 3.0f);
}

// Ties in many places and across the router's 32-expert slices (E = 100:
// a short last slice), NaN biases (never selected), T = 5 (two token
// groups) and 40 (the logits by a GEMM, route_gemm.h): the selection is the
// sort by (biased score descending, id ascending) of every expert, in that
// order, as on the CPU backend.
TEST_P(Ops, RouteSelectionIsTheFullSortOrderWithTies) {
  for (const int64_t T : {5, 40}) check_route_ties(T);
}

void Ops::check_route_ties(int64_t T) {
  HostTensors h(12);
  const int64_t E = 100, H = 64;
  const int k = 8;
  ModelWeights w;
  w.layers.resize(1);
  std::vector<float> bias(E);
  for (int64_t e = 0; e < E; ++e) bias[e] = 0.01f * static_cast<float>((e * 37) % 7);  // 7 levels: 14-15 ties each
  bias[3] = bias[50] = std::numeric_limits<float>::quiet_NaN();
  w.layers[0].router = h.store(std::vector<float>(E * H, 0.0f), DType::kF32, Shape{E, H});  // all scores 0.5
  w.layers[0].router_bias = h.store(bias, DType::kF32, Shape{E});
  prepare(w);
  std::vector<int32_t> order(E);
  std::iota(order.begin(), order.end(), 0);
  auto key = [&](int32_t e) { return std::isnan(bias[e]) ? -1.0f : 0.5f + bias[e]; };
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return key(a) > key(b); });
  int32_t* ids = dev_array(std::vector<int32_t>(T * k, -1));
  float* wts = dev_array(std::vector<float>(T * k, 0.0f));
  auto x = h.randn(T * H);
  dev_->route(to_dev(x, T), w.layers[0].router, w.layers[0].router_bias, k, 1.0f, Routing{ids, wts, T, k});
  std::vector<int32_t> cpu_ids(T * k);
  std::vector<float> cpu_w(T * k);
  cpu_->route(host_act(x, T), w.layers[0].router, w.layers[0].router_bias, k, 1.0f,
              Routing{cpu_ids.data(), cpu_w.data(), T, k});
  const auto got = to_host(ids, T * k);
  const auto got_w = to_host(wts, T * k);
  for (int64_t t = 0; t < T; ++t)
    for (int j = 0; j < k; ++j) {
      EXPECT_EQ(got[t * k + j], order[j]) << "T " << T << " token " << t << " slot " << j;
      EXPECT_EQ(got[t * k + j], cpu_ids[t * k + j]) << "T " << T << " token " << t << " slot " << j;
      EXPECT_EQ(got_w[t * k + j], cpu_w[t * k + j]) << "T " << T << " token " << t << " slot " << j;
    }
}

struct MoeCase {
  DType dtype;
  int64_t H, I;
  int E, k;
  std::vector<int64_t> tokens;
};

// Decode path (<= 64 (token, expert) pairs, moe_decode.cu) and grouped path
// (more): M2's expert shapes at decode batches 1 to 8 and beyond, and shapes
// at the decode kernels' edges (fewer 16-byte chunks per row than lanes,
// rows of more chunks than a stage holds and not a multiple of it, more than
// 8 experts a token, 63 pairs). fp32 sums in another order: 2e-5 relative.
TEST_P(Ops, MoeMatchesCpu) {
  HostTensors h(11);
  const std::vector<MoeCase> cases = {
      {DType::kF8E4M3, 3072, 1536, 16, 8, {1, 3, 4, 8}},  // more pairs: FP8 tensor cores (cuda_fp8_gemm_test)
      {DType::kBF16, 3072, 1536, 12, 8, {1, 4, 9}},
      {DType::kF8E4M3, 192, 96, 8, 3, {1, 5, 21, 22, 300}},  // rows of 12 and 6 chunks
      {DType::kBF16, 192, 96, 8, 3, {1, 22, 300}},
      {DType::kF8E4M3, 7168, 128, 8, 4, {1, 3}},   // W1|W3 rows of 448 chunks: 14 a lane
      {DType::kF8E4M3, 256, 384, 20, 10, {1, 6}},  // 2 batches of 8 slots in W2
      {DType::kBF16, 256, 64, 20, 10, {2}},
  };
  for (const MoeCase& c : cases) {
    ModelWeights w;
    w.layers.resize(1);
    LayerWeights& L = w.layers[0];
    L.experts.resize(c.E);
    for (auto& e : L.experts) {
      e.w1 = h.linear(c.dtype, c.I, c.H);
      e.w3 = h.linear(c.dtype, c.I, c.H);
      e.w2 = h.linear(c.dtype, c.H, c.I);
    }
    prepare(w);
    for (int64_t T : c.tokens) {
      std::vector<int32_t> ids(T * c.k);
      std::vector<float> rw(T * c.k);
      std::vector<int32_t> perm(c.E);
      std::iota(perm.begin(), perm.end(), 0);
      for (int64_t t = 0; t < T; ++t) {
        std::shuffle(perm.begin(), perm.end(), h.rng());  // k distinct experts per token
        float sum = 0;
        for (int j = 0; j < c.k; ++j) ids[t * c.k + j] = perm[j], sum += rw[t * c.k + j] = 0.1f + std::abs(h.normal());
        for (int j = 0; j < c.k; ++j) rw[t * c.k + j] /= sum;
      }
      auto x = h.randn(T * c.H);
      Act out = poisoned(T, c.H);
      dev_->moe(to_dev(x, T), L, Routing{dev_array(ids), dev_array(rw), T, c.k}, out);
      std::vector<float> want(T * c.H);
      cpu_->moe(host_act(x, T), L, Routing{ids.data(), rw.data(), T, c.k}, host_act(want, T));
      EXPECT_LE(rel_error(to_host(out), want), 2e-5)
          << dtype_name(c.dtype) << " H " << c.H << " I " << c.I << " E " << c.E << " T " << T;
    }
  }
}

// Router and MoE back to back on the stream (the router starts early, see
// route.cu, and so do the MoE's decode kernels, moe_decode.cu), 4 rounds
// without a host sync, each round's routing in its own buffers poisoned with
// another valid routing: a MoE kernel that read the routing before the router
// had finished would use the poison. 1 and 4 tokens.
TEST_P(Ops, MoeUsesTheRoutingOfTheRouterJustBeforeIt) {
  HostTensors h(13);
  const int64_t E = 16, H = 3072, I = 1536;
  const int k = 8, rounds = 4;
  ModelWeights w;
  LayerWeights& L = random_fp8_experts(h, w, E, H, I);
  L.router = h.store(h.randn(E * H, 1.0f / std::sqrt(float(H))), DType::kF32, Shape{E, H});
  prepare(w);
  for (int64_t T : {1, 4}) {
    std::vector<int32_t> poison_ids(T * k);
    for (int64_t i = 0; i < T * k; ++i) poison_ids[i] = int32_t(E - k + i % k);  // the last k experts
    const std::vector<float> poison_w(T * k, 1.0f / k);
    std::vector<std::vector<float>> xs;
    std::vector<int32_t*> ids;
    std::vector<float*> wts;
    std::vector<Act> outs;
    for (int r = 0; r < rounds; ++r) {
      xs.push_back(h.randn(T * H));
      ids.push_back(dev_array(poison_ids));
      wts.push_back(dev_array(poison_w));
      outs.push_back(poisoned(T, H));
    }
    std::vector<Act> gx;
    for (int r = 0; r < rounds; ++r) gx.push_back(to_dev(xs[r], T));
    for (int r = 0; r < rounds; ++r) {
      const Routing routing{ids[r], wts[r], T, k};
      dev_->route(gx[r], L.router, TensorView{}, k, 1.0f, routing);
      dev_->moe(gx[r], L, routing, outs[r]);
    }
    for (int r = 0; r < rounds; ++r) {
      std::vector<int32_t> got_ids = to_host(ids[r], T * k);
      std::vector<float> got_w = to_host(wts[r], T * k);
      EXPECT_NE(got_ids, poison_ids) << "T " << T << " round " << r << ": the router did not write its routing";
      std::vector<float> want(T * H);
      cpu_->moe(host_act(xs[r], T), L, Routing{got_ids.data(), got_w.data(), T, k}, host_act(want, T));
      EXPECT_LE(rel_error(to_host(outs[r]), want), 2e-5) << "T " << T << " round " << r;
    }
  }
}

// --load-format dummy for the GPU: the FP8 weights generated on the device
// are the host fill's bytes. The kernel alone over ranges that start off a
// word and cross the 1 M-element fill chunks, then a real-shape layer
// prepared from placeholders against the same layer filled on the host.
INSTANTIATE_TEST_SUITE_P(Devices, Ops, ::testing::ValuesIn(device_cases()),
                         [](const auto& info) { return info.param.name; });
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(Ops);  // a build without a device backend

}  // namespace
}  // namespace m2::test
