// The CPU backend's ops against straightforward float64 implementations of
// m2-spec.md §2 (the CPU backend is the reference every other backend is
// tested against, so it is tested against the math itself).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

#include "model/backend.h"

namespace m2 {
namespace {

class CpuOps : public ::testing::Test {
 protected:
  std::unique_ptr<Backend> b = make_cpu_backend();
  std::mt19937 rng{11};
  std::normal_distribution<float> nd{0.0f, 1.0f};

  std::vector<float> randn(size_t n, float scale = 1.0f) {
    std::vector<float> v(n);
    for (float& x : v) x = nd(rng) * scale;
    return v;
  }
  static TensorView view(const std::vector<float>& v, Shape s) { return TensorView{DType::kF32, s, v.data()}; }
  static Act act(std::vector<float>& v, int64_t rows) {
    return Act{v.data(), rows, static_cast<int64_t>(v.size()) / rows};
  }
};

TEST_F(CpuOps, RmsNormIsFullWidth) {
  const int64_t T = 3, n = 6144;  // the full q width: one mean over all heads
  auto x = randn(T * n, 3.0f), w = randn(n);
  std::vector<float> out(T * n);
  b->rms_norm(act(x, T), view(w, {n}), 1e-6f, act(out, T));
  for (int64_t t = 0; t < T; ++t) {
    double ss = 0;
    for (int64_t j = 0; j < n; ++j) ss += double(x[t * n + j]) * x[t * n + j];
    const double r = 1.0 / std::sqrt(ss / n + 1e-6);
    for (int64_t j = 0; j < n; ++j) ASSERT_NEAR(out[t * n + j], x[t * n + j] * r * w[j], 1e-5);
  }
}

TEST_F(CpuOps, QkNormThenPartialNeoxRope) {
  const int heads = 4, kv_heads = 2, hd = 64, rot = 32;
  const int64_t T = 5;
  auto q = randn(T * heads * hd), k = randn(T * kv_heads * hd);
  auto qn = randn(heads * hd), kn = randn(kv_heads * hd);
  const std::vector<int32_t> pos = {0, 1, 17, 300, 4095};
  auto q2 = q, k2 = k;
  b->qk_norm_rope(act(q2, T), act(k2, T), view(qn, {heads * hd}), view(kn, {kv_heads * hd}), 1e-6f, pos,
                  RopeParams{hd, rot, 5e6});
  auto expect = [&](const std::vector<float>& x, const std::vector<float>& w, int nh, int64_t t, int64_t j) {
    const int64_t width = nh * hd;
    double ss = 0;
    for (int64_t i = 0; i < width; ++i) ss += double(x[t * width + i]) * x[t * width + i];
    const double r = 1.0 / std::sqrt(ss / width + 1e-6);
    auto normed = [&](int64_t i) { return x[t * width + i] * r * w[i]; };
    const int64_t d = j % hd, base = j - d;
    if (d >= rot) return normed(j);  // dims past rotary_dim pass through
    const int half = rot / 2, i = static_cast<int>(d % half);
    const double theta = pos[t] / std::pow(5e6, 2.0 * i / rot);
    const double a = normed(base + i), c = normed(base + i + half);
    return d < half ? a * std::cos(theta) - c * std::sin(theta) : c * std::cos(theta) + a * std::sin(theta);
  };
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t j = 0; j < heads * hd; ++j) ASSERT_NEAR(q2[t * heads * hd + j], expect(q, qn, heads, t, j), 1e-4);
    for (int64_t j = 0; j < kv_heads * hd; ++j)
      ASSERT_NEAR(k2[t * kv_heads * hd + j], expect(k, kn, kv_heads, t, j), 1e-4);
  }
}

// Tensor parallelism: each rank's slice of heads, normed with the sums of
// squares of all slices, is the matching slice of the full-width norm (and
// RoPE); with kv heads replicated the counts scale with the sums.
TEST_F(CpuOps, QkNormFromSummedSlicesIsTheFullWidthNorm) {
  const int heads = 4, kv_heads = 2, hd = 64, rot = 32;
  const int64_t T = 3;
  auto q = randn(T * heads * hd, 2.0f), k = randn(T * kv_heads * hd, 0.5f);
  auto qn = randn(heads * hd), kn = randn(kv_heads * hd);
  const std::vector<int32_t> pos = {0, 9, 511};
  const RopeParams rope{hd, rot, 5e6};
  auto q_full = q, k_full = k;
  b->qk_norm_rope(act(q_full, T), act(k_full, T), view(qn, {heads * hd}), view(kn, {kv_heads * hd}), 1e-6f, pos, rope);
  for (int ranks : {2, 4}) {  // 4: one q head per rank, each kv head on two ranks
    const int qh = heads / ranks, kvh = std::max(1, kv_heads / ranks);
    const int64_t qw = qh * hd, kw = kvh * hd;
    std::vector<std::vector<float>> qs(ranks), ks(ranks), ss(ranks, std::vector<float>(2 * T));
    std::vector<float> sum(2 * T, 0.0f);
    for (int r = 0; r < ranks; ++r) {
      const int kv0 = kv_heads >= ranks ? r * kvh : r * kv_heads / ranks;
      for (int64_t t = 0; t < T; ++t) {
        qs[r].insert(qs[r].end(), q.begin() + t * heads * hd + r * qw, q.begin() + t * heads * hd + (r + 1) * qw);
        ks[r].insert(ks[r].end(), k.begin() + t * kv_heads * hd + kv0 * hd, k.begin() + t * kv_heads * hd + kv0 * hd + kw);
      }
      b->qk_sum_squares(act(qs[r], T), act(ks[r], T), act(ss[r], T));
      for (int64_t i = 0; i < 2 * T; ++i) sum[i] += ss[r][i];
    }
    for (int r = 0; r < ranks; ++r) {
      const int kv0 = kv_heads >= ranks ? r * kvh : r * kv_heads / ranks;
      std::vector<float> qnr(qn.begin() + r * qw, qn.begin() + (r + 1) * qw), knr(kn.begin() + kv0 * hd, kn.begin() + kv0 * hd + kw);
      b->qk_norm_rope_sums(act(qs[r], T), act(ks[r], T), act(sum, T), double(qw) * ranks, double(kw) * ranks,
                           view(qnr, {qw}), view(knr, {kw}), 1e-6f, pos, rope);
      for (int64_t t = 0; t < T; ++t) {
        for (int64_t j = 0; j < qw; ++j) ASSERT_NEAR(qs[r][t * qw + j], q_full[t * heads * hd + r * qw + j], 2e-6) << ranks;
        for (int64_t j = 0; j < kw; ++j)
          ASSERT_NEAR(ks[r][t * kw + j], k_full[t * kv_heads * hd + kv0 * hd + j], 2e-6) << ranks;
      }
    }
  }
}

TEST_F(CpuOps, RouterSelectsWithBiasButWeighsWithoutIt) {
  const int64_t T = 6, H = 48, E = 16;
  const int k = 4;
  auto x = randn(T * H), gate = randn(E * H, 0.3f);
  std::vector<float> bias(E);
  for (int e = 0; e < E; ++e) bias[e] = (e % 3 == 0) ? 0.5f : 0.0f;  // favours experts 0, 3, 6, ...
  std::vector<int32_t> ids(T * k);
  std::vector<float> w(T * k);
  b->route(act(x, T), view(gate, {E, H}), view(bias, {E}), k, 1.0f, Routing{ids.data(), w.data(), T, k});
  for (int64_t t = 0; t < T; ++t) {
    std::vector<double> s(E);
    for (int e = 0; e < E; ++e) {
      double l = 0;
      for (int64_t h = 0; h < H; ++h) l += double(x[t * H + h]) * gate[e * H + h];
      s[e] = 1.0 / (1.0 + std::exp(-l));
    }
    std::vector<int> order(E);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int a, int c) { return s[a] + bias[a] > s[c] + bias[c]; });
    double sum = 0;
    for (int j = 0; j < k; ++j) sum += s[order[j]];
    for (int j = 0; j < k; ++j) {
      EXPECT_EQ(ids[t * k + j], order[j]);
      EXPECT_NEAR(w[t * k + j], s[order[j]] / sum, 1e-6);
    }
  }
}

TEST_F(CpuOps, RouterBreaksTiesTowardLowerExpertId) {
  const int64_t H = 8, E = 6;
  auto x = randn(H);
  std::vector<float> gate(E * H, 0.0f), bias(E, 0.0f);  // all scores 0.5
  std::vector<int32_t> ids(2);
  std::vector<float> w(2);
  b->route(act(x, 1), view(gate, {E, H}), view(bias, {E}), 2, 1.0f, Routing{ids.data(), w.data(), 1, 2});
  EXPECT_EQ(ids, (std::vector<int32_t>{0, 1}));
  EXPECT_FLOAT_EQ(w[0], 0.5f);
}

// A NaN bias makes that expert's selection score NaN: it ranks last (the
// CUDA backend does the same), whatever its position.
TEST_F(CpuOps, RouterRanksNanBiasedScoresLast) {
  const int64_t H = 8, E = 6;
  auto x = randn(H);
  std::vector<float> gate(E * H, 0.0f), bias = {0.0f, std::nanf(""), 0.1f, std::nanf(""), 0.0f, -0.1f};
  std::vector<int32_t> ids(E);
  std::vector<float> w(E);
  b->route(act(x, 1), view(gate, {E, H}), view(bias, {E}), static_cast<int>(E), 1.0f,
           Routing{ids.data(), w.data(), 1, static_cast<int>(E)});
  EXPECT_EQ(ids, (std::vector<int32_t>{2, 0, 4, 5, 1, 3}));
}

TEST_F(CpuOps, MoeIsWeightedSumOfSwiGluExperts) {
  const int64_t T = 7, H = 40, I = 24;
  const int E = 5, k = 2;
  std::vector<std::vector<uint16_t>> store;  // bf16 expert weights
  LayerWeights layer;
  layer.experts.resize(E);
  std::vector<std::vector<double>> w1(E), w2(E), w3(E);
  auto make = [&](int64_t rows, int64_t cols, std::vector<double>* vals) {
    store.emplace_back(rows * cols);
    auto& s = store.back();
    vals->resize(rows * cols);
    for (int64_t i = 0; i < rows * cols; ++i) {
      s[i] = f32_to_bf16(nd(rng) / std::sqrt(float(cols)));
      (*vals)[i] = bf16_to_f32(s[i]);
    }
    Linear l;
    l.weight = TensorView{DType::kBF16, Shape{rows, cols}, s.data()};
    return l;
  };
  store.reserve(3 * E);
  for (int e = 0; e < E; ++e) {
    layer.experts[e].w1 = make(I, H, &w1[e]);
    layer.experts[e].w3 = make(I, H, &w3[e]);
    layer.experts[e].w2 = make(H, I, &w2[e]);
  }
  auto x = randn(T * H);
  std::vector<int32_t> ids(T * k);
  std::vector<float> rw(T * k);
  for (int64_t t = 0; t < T; ++t) {
    ids[t * k] = static_cast<int32_t>(t % E);
    ids[t * k + 1] = static_cast<int32_t>((t * 3 + 1) % E == t % E ? (t + 1) % E : (t * 3 + 1) % E);
    rw[t * k] = 0.7f, rw[t * k + 1] = 0.3f;
  }
  std::vector<float> out(T * H);
  b->moe(act(x, T), layer, Routing{ids.data(), rw.data(), T, k}, act(out, T));
  for (int64_t t = 0; t < T; ++t) {
    std::vector<double> want(H, 0.0);
    for (int j = 0; j < k; ++j) {
      const int e = ids[t * k + j];
      std::vector<double> u(I);
      for (int64_t i = 0; i < I; ++i) {
        double g = 0, up = 0;
        for (int64_t h = 0; h < H; ++h) g += w1[e][i * H + h] * x[t * H + h], up += w3[e][i * H + h] * x[t * H + h];
        u[i] = g / (1 + std::exp(-g)) * up;
      }
      for (int64_t h = 0; h < H; ++h) {
        double y = 0;
        for (int64_t i = 0; i < I; ++i) y += w2[e][h * I + i] * u[i];
        want[h] += rw[t * k + j] * y;
      }
    }
    for (int64_t h = 0; h < H; ++h) ASSERT_NEAR(out[t * H + h], want[h], 1e-5);
  }
}

class PagedAttention : public CpuOps, public ::testing::WithParamInterface<DType> {};

// The values a cache of `dtype` holds for x [tokens, kv_heads * hd].
std::vector<float> as_stored(const std::vector<float>& x, int kv_heads, int hd, DType dtype) {
  std::vector<float> out(x.size());
  for (size_t t = 0; t < x.size() / (kv_heads * hd); ++t) {
    for (int h = 0; h < kv_heads; ++h) {
      const float* v = x.data() + (t * kv_heads + h) * hd;
      float amax = 0;
      for (int d = 0; d < hd; ++d) amax = std::max(amax, std::fabs(v[d]));
      const float sc = amax > 0 ? amax / 448.0f : 1.0f;
      for (int d = 0; d < hd; ++d) {
        float& o = out[(t * kv_heads + h) * hd + d];
        if (dtype == DType::kBF16) o = bf16_to_f32(f32_to_bf16(v[d]));
        else if (dtype == DType::kF8E4M3) o = f8e4m3_to_f32(f32_to_f8e4m3(v[d] / sc)) * sc;
        else o = v[d];
      }
    }
  }
  return out;
}

TEST_P(PagedAttention, MatchesDenseCausalGqaOverStoredValues) {
  const DType dtype = GetParam();
  const int heads = 6, kv_heads = 2, hd = 40, bs = 4;
  const float scale = 1.0f / std::sqrt(float(hd));
  // Two sequences: 9 cached tokens + 3 new, and 5 new from scratch.
  struct Seq { int64_t ctx, rows; std::vector<int32_t> blocks; };
  std::vector<Seq> seqs = {{12, 3, {5, 0, 3}}, {5, 5, {1, 4}}};
  KvCacheShape shape{1, kv_heads, hd, bs, 6, dtype};
  KvCache cache(shape, b->allocate(KvCache::storage_bytes(shape)));
  std::vector<std::vector<float>> keys, vals;  // dense per sequence [ctx, kv_heads*hd]
  std::vector<SeqSlice> slices;
  int64_t row = 0;
  for (auto& s : seqs) {
    auto kx = randn(s.ctx * kv_heads * hd), vx = randn(s.ctx * kv_heads * hd);
    std::vector<int64_t> slots;
    for (int64_t p = 0; p < s.ctx; ++p) slots.push_back(int64_t(s.blocks[p / bs]) * bs + p % bs);
    b->kv_store(cache, 0, act(kx, s.ctx), act(vx, s.ctx), slots);
    keys.push_back(as_stored(kx, kv_heads, hd, dtype));
    vals.push_back(as_stored(vx, kv_heads, hd, dtype));
    slices.push_back({row, s.rows, s.ctx, s.blocks});
    row += s.rows;
  }
  auto q = randn(row * heads * hd);
  std::vector<float> out(row * heads * hd);
  b->attention(act(q, row), cache, 0, slices, heads, scale, act(out, row));
  for (size_t si = 0; si < seqs.size(); ++si) {
    for (int64_t i = 0; i < seqs[si].rows; ++i) {
      const int64_t r = slices[si].first_row + i, pos = seqs[si].ctx - seqs[si].rows + i;
      for (int h = 0; h < heads; ++h) {
        const int g = h / (heads / kv_heads);
        std::vector<double> s(pos + 1);
        double m = -1e300, sum = 0;
        for (int64_t j = 0; j <= pos; ++j) {
          double d = 0;
          for (int e = 0; e < hd; ++e) d += double(q[(r * heads + h) * hd + e]) * keys[si][(j * kv_heads + g) * hd + e];
          s[j] = d * scale, m = std::max(m, s[j]);
        }
        for (auto& v : s) sum += (v = std::exp(v - m));
        for (int e = 0; e < hd; ++e) {
          double o = 0;
          for (int64_t j = 0; j <= pos; ++j) o += s[j] / sum * vals[si][(j * kv_heads + g) * hd + e];
          ASSERT_NEAR(out[(r * heads + h) * hd + e], o, 1e-5) << "seq " << si << " row " << i << " head " << h;
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(KvDtypes, PagedAttention, ::testing::Values(DType::kF32, DType::kBF16, DType::kF8E4M3),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

}  // namespace
}  // namespace m2
