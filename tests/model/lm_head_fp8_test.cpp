// --lm-head-dtype fp8 (model/lm_head_quant.h): the BF16 lm_head quantised at
// load to FP8 e4m3 with 128x128 block scales, against the BF16 head as
// stored, on the prompts of the reference fixtures (tests/data/reference/).
//
// The bound is derived, not fitted. Only the head changes, so both runs see
// the same final normed hidden state x [T, H] and Δ[t, v] = Σ_h x[t, h] ·
// (Ŵ[v, h] − W[v, h]). Rounding w / s to e4m3 (3 mantissa bits, round to
// nearest even) is off by at most 2^-4 of the value in the normal range and
// by half the subnormal step, 2^-10, below 2^-6; times the block scale s:
//   |Ŵ − W| ≤ e[v, h] = max(2^-4 |W|, 2^-10 s)  (+ 2^-22 |W| for the fp32 w / s),
// so |Δ[t, v]| ≤ Σ_h |x[t, h]| e[v, h], plus the fp32 accumulation error of
// the two dot products, γ_n Σ_h |x| (|W| + e) each (γ_n = n u / (1 − n u),
// u = 2^-24, n = H + 4 terms and scale products). x itself is read exactly
// through a probe head, [V, H] with the identity in its first H rows
// (logit h = 1.0 · x_h, nothing rounded), which needs V ≥ H (all fixtures).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <memory>

#include "model/greedy.h"
#include "model/lm_head_quant.h"
#include "model/minimax_m2.h"
#include "model/weight_update.h"
#include "test_paths.h"

namespace m2 {
namespace {

std::unique_ptr<ModelWeights> load(const std::string& dir, bool fp8_head) {
  LoadOptions o;
  o.fp8_lm_head = fp8_head;
  auto w = load_model(dir, o);
  EXPECT_TRUE(w.ok()) << w.status().message();
  return w.ok() ? std::move(*w) : nullptr;
}

// Blocks of every edge case: a partial 128x128 tile (200 x 136 has tiles of
// 72 rows and 8 columns at the edges), an all-zero tile, a tile too small
// for amax / 448, tiles whose elements span more than e4m3's range (some
// land in its subnormals).
TEST(QuantizeFp8Blocks, EachElementWithinItsRoundingBound) {
  const int64_t R = 200, C = 136;
  std::vector<float> w(static_cast<size_t>(R * C));
  for (int64_t i = 0; i < R * C; ++i) w[i] = std::sin(0.37 * i) * std::exp2(std::fmod(i * 0.61, 24.0) - 16.0);
  for (int64_t r = 128; r < R; ++r) {
    for (int64_t c = 0; c < 128; ++c) w[r * C + c] = 0.0f;    // tile (1, 0): zeros
    for (int64_t c = 128; c < C; ++c) w[r * C + c] = 1e-43f;  // tile (1, 1): amax / 448 underflows to 0
  }
  std::vector<uint8_t> codes(w.size());
  std::vector<float> scales(2 * 2);
  quantize_fp8_blocks(TensorView{DType::kF32, Shape{R, C}, w.data()}, 128, 128, codes.data(), scales.data());
  EXPECT_EQ(scales[2], 1.0f);
  EXPECT_EQ(scales[3], 1.0f);
  for (int64_t r = 0; r < R; ++r)
    for (int64_t c = 0; c < C; ++c) {
      const double s = scales[(r / 128) * 2 + c / 128], x = w[r * C + c];
      const double back = f8e4m3_to_f32(codes[r * C + c]) * s;
      // The e4m3 rounding of w / s, plus the fp32 rounding of w / s itself
      // (u = 2^-24 of it, and 2^-4 of that again: under 2^-22 |w|).
      const double bound = std::max(std::ldexp(std::fabs(x), -4), std::ldexp(s, -10)) * (1 + 0x1p-20) +
                           0x1p-22 * std::fabs(x);
      ASSERT_LE(std::fabs(back - x), bound) << r << "," << c;
    }
}

struct HeadError {
  double max_abs = 0;          // max |Δ| over [T, V]
  double max_rel_dot = 0;      // max |Δ| / Σ_h |x W| (what 2^-4 bounds)
  double max_rel_range = 0;    // max |Δ| / (the row's max logit − min logit)
  double max_of_bound = 0;     // max |Δ| / bound
  int64_t argmax_same = 0, rows = 0, argmax_must_agree = 0;
};

// The head error of one fixture on `prompt`, with every logit checked
// against its bound, and the greedy ids of both heads.
HeadError measure(const std::string& dir, const std::vector<int32_t>& prompt) {
  HeadError e;
  auto stored = load(dir, false), quant = load(dir, true), probe = load(dir, false);
  if (!stored || !quant || !probe) return e;
  const ModelConfig& c = stored->config;
  const int64_t V = c.vocab_size, H = c.hidden_size, T = static_cast<int64_t>(prompt.size());
  EXPECT_GE(V, H);
  EXPECT_TRUE(quant->lm_head.is_fp8());
  EXPECT_FALSE(stored->lm_head.is_fp8());
  // The probe head: logit h of row t is x[t, h].
  std::unique_ptr<uint8_t[]> eye(new uint8_t[V * H * 2]());
  auto* eye16 = reinterpret_cast<uint16_t*>(eye.get());
  for (int64_t h = 0; h < H; ++h) eye16[h * H + h] = f32_to_bf16(1.0f);
  probe->lm_head = Linear{};
  probe->lm_head.weight = TensorView{DType::kBF16, Shape{V, H}, eye.get()};

  auto backend = make_cpu_backend();
  MiniMaxM2 m_stored(*stored, *backend), m_quant(*quant, *backend), m_probe(*probe, *backend);
  auto ref = all_logits(m_stored, prompt, DType::kF32);
  auto got = all_logits(m_quant, prompt, DType::kF32);
  auto xs = all_logits(m_probe, prompt, DType::kF32);
  EXPECT_TRUE(ref.ok() && got.ok() && xs.ok());
  if (!ref.ok() || !got.ok() || !xs.ok()) return e;

  const Linear& q = quant->lm_head;
  const int64_t scale_ld = q.scale_inv.shape[1];
  const double gamma = (H + 4) * 0x1p-24 / (1 - (H + 4) * 0x1p-24);
  std::vector<double> w_row(H), e_row(H), bound(V);
  std::vector<double> abs_x(H);
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t h = 0; h < H; ++h) abs_x[h] = std::fabs((*xs)[t * V + h]);
    const float* r = ref->data() + t * V;
    const float* g = got->data() + t * V;
    const auto [lo, hi] = std::minmax_element(r, r + V);
    for (int64_t v = 0; v < V; ++v) {
      double dot_abs = 0, err_abs = 0;
      for (int64_t h = 0; h < H; ++h) {
        const double w = std::fabs(tensor_get_f32(stored->lm_head.weight, v * H + h));
        const double s = q.scale_inv.as<float>()[(v / q.block_rows) * scale_ld + h / q.block_cols];
        const double ev = std::max(std::ldexp(w, -4), std::ldexp(s, -10)) * (1 + 0x1p-20) + 0x1p-22 * w;
        dot_abs += abs_x[h] * w;
        err_abs += abs_x[h] * ev;
      }
      bound[v] = err_abs + 2 * gamma * (dot_abs + err_abs);
      const double d = std::fabs(static_cast<double>(g[v]) - r[v]);
      EXPECT_LE(d, bound[v]) << dir << " row " << t << " logit " << v;
      e.max_abs = std::max(e.max_abs, d);
      if (dot_abs > 0) e.max_rel_dot = std::max(e.max_rel_dot, d / dot_abs);
      if (*hi > *lo) e.max_rel_range = std::max(e.max_rel_range, d / (*hi - *lo));
      if (bound[v] > 0) e.max_of_bound = std::max(e.max_of_bound, d / bound[v]);
    }
    // Greedy ids: the same where the BF16 head's top-2 gap exceeds what the
    // two logits can move together (then no flip is possible).
    const int64_t a = std::max_element(r, r + V) - r, b = std::max_element(g, g + V) - g;
    float second = -INFINITY;
    int64_t a2 = -1;
    for (int64_t v = 0; v < V; ++v)
      if (v != a && r[v] > second) second = r[v], a2 = v;
    ++e.rows;
    e.argmax_same += a == b;
    if (r[a] - second > bound[a] + bound[a2]) {
      ++e.argmax_must_agree;
      EXPECT_EQ(a, b) << dir << " row " << t;
    }
  }
  return e;
}

void report(const std::string& name, const HeadError& e) {
  std::printf("%s: FP8 head vs BF16 head: max |dlogit| %.3g, max |dlogit| / sum|x W| %.3g (bound ~2^-4 = %.3g), "
              "max |dlogit| / row logit range %.3g, at most %.2f of the derived bound; argmax the same on %lld of "
              "%lld positions (%lld with a top-2 gap the head error cannot close)\n",
              name.c_str(), e.max_abs, e.max_rel_dot, 0x1p-4, e.max_rel_range, e.max_of_bound,
              static_cast<long long>(e.argmax_same), static_cast<long long>(e.rows),
              static_cast<long long>(e.argmax_must_agree));
}

// prompt_ids of tests/data/reference/<variant>/prompt.json (m2-aligned-fp8's
// has no greedy ids, so not test::load_reference).
std::vector<int32_t> reference_prompt(const std::string& variant) {
  auto j = read_json_file(test::data_path("reference/" + variant + "/prompt.json"));
  EXPECT_TRUE(j.ok()) << j.status().message();
  return j.ok() ? (*j)["prompt_ids"].get<std::vector<int32_t>>() : std::vector<int32_t>{};
}

TEST(Fp8LmHead, LogitErrorWithinTheE4m3BoundOnTheReferencePrompts) {
  for (const char* variant : {"m2-tiny-bf16", "m2-tiny-fp8", "m2-aligned-fp8"}) {
    const std::vector<int32_t> prompt = reference_prompt(variant);
    ASSERT_FALSE(prompt.empty()) << variant;
    const HeadError e = measure(test::data_path(variant), prompt);
    EXPECT_EQ(e.rows, static_cast<int64_t>(prompt.size()));
    report(variant, e);
  }
}

TEST(Fp8LmHead, DemoModel) {
  const std::string dir = std::string(M2CPP_SOURCE_DIR) + "/models/m2-demo";
  if (!std::filesystem::exists(dir + "/model.safetensors"))
    GTEST_SKIP() << "models/m2-demo/model.safetensors is not there (see tools/demo_model/)";
  const test::Reference ref = test::load_reference("m2-demo");
  const HeadError e = measure(dir, ref.prompt);
  EXPECT_EQ(e.rows, static_cast<int64_t>(ref.prompt.size()));
  report("m2-demo", e);
  // Greedy decoding through the KV cache with each head: stated, not
  // asserted (a near-tie may legitimately flip under an 8-bit head).
  auto stored = load(dir, false), quant = load(dir, true);
  auto backend = make_cpu_backend();
  MiniMaxM2 a(*stored, *backend), b(*quant, *backend);
  GreedyOptions o;
  o.max_tokens = static_cast<int>(ref.greedy_ids.size());
  o.ignore_eos = true;
  auto ga = generate_greedy(a, ref.greedy_prompt, o), gb = generate_greedy(b, ref.greedy_prompt, o);
  ASSERT_TRUE(ga.ok() && gb.ok());
  EXPECT_EQ(*ga, ref.greedy_ids);  // the BF16 head is the reference's
  size_t same = 0;
  while (same < ga->size() && same < gb->size() && (*ga)[same] == (*gb)[same]) ++same;
  std::printf("m2-demo: greedy continuation of %zu tokens: the FP8 head's first %zu equal the BF16 head's\n",
              ga->size(), same);
}

// A served FP8 head takes a trainer's BF16 head: quantised as the load was,
// so replacing it by its own stored values gives the load's FP8 head bit
// for bit.
TEST(Fp8LmHead, WeightUpdateOfABf16HeadIsQuantisedLikeTheLoad) {
  const std::string dir = test::data_path("m2-tiny-bf16");
  auto stored = load(dir, false);
  auto set = wrap_loaded_weights(load(dir, true));
  const TensorView w = stored->lm_head.weight;
  UpdateTensor u{"lm_head.weight", w.dtype, w.shape, nullptr, "test"};
  std::shared_ptr<uint8_t[]> bytes(new uint8_t[w.nbytes()]);
  std::memcpy(bytes.get(), w.data, w.nbytes());
  u.data = std::move(bytes);
  std::vector<UpdateTensor> up;
  up.push_back(std::move(u));
  auto next = build_updated_weights(*set, std::move(up));
  ASSERT_TRUE(next.ok()) << next.status().message();
  const Linear& a = set->weights().lm_head;
  const Linear& b = (*next)->weights().lm_head;
  ASSERT_TRUE(b.is_fp8());
  EXPECT_NE(a.weight.data, b.weight.data);  // the update's own bytes
  EXPECT_EQ(std::memcmp(a.weight.data, b.weight.data, a.weight.nbytes()), 0);
  EXPECT_EQ(std::memcmp(a.scale_inv.data, b.scale_inv.data, a.scale_inv.nbytes()), 0);
}

}  // namespace
}  // namespace m2
