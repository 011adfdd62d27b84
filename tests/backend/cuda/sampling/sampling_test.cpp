// Backend::sample on the GPU against the CPU backend's (model/sampling.cpp)
// on the same logits: greedy ids identical (ties -> lowest id), seeded draws
// identical where rounding cannot flip them (top-p / min-p cut-offs placed
// midway between two candidates' cumulative masses / weights), raw logprobs
// within 1e-5, penalties, forced tokens, batch invariance, and the
// distribution of draws over many (seed, step) pairs (chi-square).
#include <algorithm>
#include <cmath>
#include <numeric>

#include "../cuda_test_util.h"

namespace m2::test {
namespace {

constexpr int64_t kVocab = 200064;

class Sampling : public CudaTest {
 protected:
  // Both backends on copies of `logits` [rows, V]; results side by side.
  void run(const std::vector<float>& logits, int64_t V, const std::vector<SampleRow>& rows,
           std::vector<SampledToken>* gpu, std::vector<SampledToken>* cpu) {
    const int64_t R = static_cast<int64_t>(rows.size());
    gpu->assign(R, {});
    cpu->assign(R, {});
    Act g = to_gpu(logits, R);
    ASSERT_TRUE(gpu_->sample(g, rows, *gpu).ok());
    std::vector<float> h = logits;
    ASSERT_TRUE(cpu_->sample(Act{h.data(), R, V}, rows, *cpu).ok());
  }
  void expect_same(const std::vector<SampledToken>& gpu, const std::vector<SampledToken>& cpu, const std::string& what,
                   const std::vector<float>* logits = nullptr, int64_t V = 0) {
    for (size_t r = 0; r < gpu.size(); ++r) {
      std::string ctx = what + ", row " + std::to_string(r);
      if (logits && gpu[r].id >= 0 && gpu[r].id < V && cpu[r].id >= 0)
        ctx += " (logit of gpu id " + std::to_string((*logits)[r * V + gpu[r].id]) + ", of cpu id " +
               std::to_string((*logits)[r * V + cpu[r].id]) + ")";
      EXPECT_EQ(gpu[r].id, cpu[r].id) << ctx;
      EXPECT_NEAR(gpu[r].logprob, cpu[r].logprob, 1e-5) << ctx;
      ASSERT_EQ(gpu[r].top.size(), cpu[r].top.size()) << ctx;
      for (size_t j = 0; j < cpu[r].top.size(); ++j) {
        EXPECT_EQ(gpu[r].top[j].id, cpu[r].top[j].id) << ctx << ", top " << j;
        EXPECT_NEAR(gpu[r].top[j].logprob, cpu[r].top[j].logprob, 1e-5) << ctx << ", top " << j;
      }
    }
  }
  // `copies` copies of each of `rows` (logit row logits[r]) drawn with
  // seeds 1000 r + c (the same cut, many noises): GPU and CPU tokens alike;
  // the GPU's, copies of a row in a run.
  std::vector<SampledToken> draw_copies(const std::vector<std::vector<float>>& logits, const std::vector<SampleRow>& rows,
                                        int copies, int64_t V, const std::string& what) {
    std::vector<float> l;
    std::vector<SampleRow> all;
    for (size_t r = 0; r < rows.size(); ++r) {
      for (int c = 0; c < copies; ++c) {
        l.insert(l.end(), logits[r].begin(), logits[r].end());
        all.push_back(rows[r]);
        all.back().seed = 1000 * r + c, all.back().step = c;
      }
    }
    std::vector<SampledToken> g, cpu;
    run(l, V, all, &g, &cpu);
    expect_same(g, cpu, what, &l, V);
    return g;
  }
};

// Logits like a model's: N(0, 3) with a few strong tokens.
std::vector<float> model_like(HostTensors& h, int64_t R, int64_t V) {
  std::vector<float> l = h.randn(R * V, 3.0f);
  for (int64_t r = 0; r < R; ++r)
    for (int j = 0; j < 8; ++j) l[r * V + (h.rng()() % V)] += 8.0f + j;
  return l;
}

TEST_F(Sampling, GreedyIsArgmaxWithLowestIdOnTiesAndRawLogprobs) {
  HostTensors h(11);
  const int64_t R = 33;
  std::vector<float> l = model_like(h, R, kVocab);
  for (int64_t r = 0; r < R; r += 3) {  // ties at the maximum across blocks of the cluster
    const float m = *std::max_element(l.begin() + r * kVocab, l.begin() + (r + 1) * kVocab);
    l[r * kVocab + 150000 + r] = m + 1.0f;
    l[r * kVocab + 7 + r] = m + 1.0f;
  }
  std::vector<SampleRow> rows(R);
  for (int64_t r = 0; r < R; ++r) rows[r].temperature = 0.0f, rows[r].logprobs = static_cast<int>(r % 22) - 1;
  std::vector<SampledToken> g, c;
  run(l, kVocab, rows, &g, &c);
  expect_same(g, c, "greedy", &l, kVocab);
  for (int64_t r = 0; r < R; r += 3) EXPECT_EQ(g[r].id, 7 + r) << "tie in row " << r << ": the lowest id wins";
}

// Sampling rows whose top-p and min-p cut-offs sit midway between
// candidates (computed on the CPU from the edited logits), so that rounding
// differences cannot move them.
std::vector<SampleRow> sampling_rows(const std::vector<float>& l, int64_t R, int64_t V, uint64_t step) {
  std::vector<SampleRow> rows(R);
  for (int64_t r = 0; r < R; ++r) {
    SampleRow& x = rows[r];
    x.temperature = 0.5f + 0.25f * (r % 4);
    x.top_k = (r % 3 == 0) ? 0 : static_cast<int>(5 + 17 * r);
    x.seed = 1000 + r;
    x.step = step;
    x.logprobs = r % 5 == 0 ? 5 : -1;
    std::vector<int32_t> idx(V);
    std::iota(idx.begin(), idx.end(), 0);
    const float* lr = l.data() + r * V;
    const size_t keep = x.top_k > 0 ? static_cast<size_t>(x.top_k) : 4096;  // enough for the cut-offs below
    std::partial_sort(idx.begin(), idx.begin() + keep, idx.end(), [&](int32_t a, int32_t b) {
      return sample_rank_key(lr[a], a) > sample_rank_key(lr[b], b);
    });
    std::vector<double> w(keep);
    double sum = 0;
    for (size_t i = 0; i < keep; ++i) sum += w[i] = std::exp((double(lr[idx[i]]) - lr[idx[0]]) / x.temperature);
    if (x.top_k == 0) sum = 0;  // the whole vocabulary's mass
    if (x.top_k == 0)
      for (int64_t i = 0; i < V; ++i) sum += std::exp((double(lr[i]) - lr[idx[0]]) / x.temperature);
    if (r % 2 == 1) {  // top-p midway between the cumulative masses of candidates 2 and 3 (or less)
      double c = 0;
      const size_t k = std::min<size_t>(3, keep - 1);
      for (size_t i = 0; i < k; ++i) c += w[i];
      x.top_p = static_cast<float>((c - w[k - 1] / 2) / sum);
    }
    if (r % 4 == 2) x.min_p = static_cast<float>((w[std::min<size_t>(4, keep - 1)] + w[std::min<size_t>(5, keep - 1)]) / 2);
  }
  return rows;
}

TEST_F(Sampling, SeededDrawsMatchTheCpu) {
  HostTensors h(12);
  const int64_t R = 24;
  const std::vector<float> l = model_like(h, R, kVocab);
  for (uint64_t step : {0, 1, 77}) {
    std::vector<SampledToken> g, c;
    run(l, kVocab, sampling_rows(l, R, kVocab, step), &g, &c);
    expect_same(g, c, "seeded draw at step " + std::to_string(step), &l, kVocab);
  }
}

TEST_F(Sampling, TopKDrawsStayInTheTopK) {
  HostTensors h(13);
  const int64_t R = 64;
  std::vector<float> l(R * kVocab);
  const std::vector<float> one = model_like(h, 1, kVocab);
  for (int64_t r = 0; r < R; ++r) std::copy(one.begin(), one.end(), l.begin() + r * kVocab);
  std::vector<int32_t> idx(kVocab);
  std::iota(idx.begin(), idx.end(), 0);
  std::partial_sort(idx.begin(), idx.begin() + 3, idx.end(), [&](int32_t a, int32_t b) { return one[a] > one[b]; });
  std::vector<SampleRow> rows(R);
  for (int64_t r = 0; r < R; ++r) rows[r].temperature = 5.0f, rows[r].top_k = 3, rows[r].seed = 5, rows[r].step = r;
  std::vector<SampledToken> g, c;
  run(l, kVocab, rows, &g, &c);
  expect_same(g, c, "top-3 at temperature 5");
  for (int64_t r = 0; r < R; ++r)
    EXPECT_TRUE(g[r].id == idx[0] || g[r].id == idx[1] || g[r].id == idx[2]) << "row " << r << " drew " << g[r].id;
}

TEST_F(Sampling, PenaltiesBansAndForcedTokensMatchTheCpu) {
  HostTensors h(14);
  const int64_t R = 8;
  const std::vector<float> l = model_like(h, R, kVocab);
  std::vector<int32_t> top(R);
  for (int64_t r = 0; r < R; ++r)
    top[r] = static_cast<int32_t>(std::max_element(l.begin() + r * kVocab, l.begin() + (r + 1) * kVocab) - l.begin() - r * kVocab);
  std::vector<std::vector<int32_t>> banned(R), prompt(R);
  std::vector<std::vector<LogitBias>> bias(R);
  std::vector<std::vector<TokenCount>> counts(R);
  std::vector<SampleRow> rows(R);
  for (int64_t r = 0; r < R; ++r) {
    SampleRow& x = rows[r];
    x.temperature = r < 4 ? 0.0f : 0.8f;
    x.seed = 77, x.step = r, x.logprobs = 3;
    banned[r] = {top[r], 0, static_cast<int32_t>(kVocab - 1)};                       // the argmax is banned
    bias[r] = {{12345, 30.0f}, {top[r], 5.0f}, {200000, -3.0f}};                        // 12345 becomes likely
    prompt[r] = {12345, 5, 99999};                                                      // and is penalised again
    counts[r] = {{12345, 2}, {777, 1}};
    x.repetition_penalty = 1.5f, x.frequency_penalty = 0.5f, x.presence_penalty = 0.25f;
    x.banned = banned[r], x.logit_bias = bias[r], x.prompt_ids = prompt[r], x.output_counts = counts[r];
  }
  rows[3].forced = 4242;
  rows[7].forced = 1;
  std::vector<SampledToken> g, c;
  run(l, kVocab, rows, &g, &c);
  expect_same(g, c, "penalties", &l, kVocab);
  for (int64_t r = 0; r < R; ++r) EXPECT_NE(g[r].id, top[r]) << "row " << r << ": the banned argmax was drawn";
  EXPECT_EQ(g[3].id, 4242);
  EXPECT_EQ(g[7].id, 1);
}

// Token masks (constrained decoding, SampleRow::allowed): the GPU draws only
// allowed tokens, with the CPU's ids and raw logprobs, greedy and seeded,
// with top-k / top-p, edits on masked tokens, a mask allowing one token, and
// rows without a mask beside masked ones; a forced row ignores its mask.
TEST_F(Sampling, TokenMasksMatchTheCpu) {
  HostTensors h(15);
  const int64_t R = 12, W = (kVocab + 31) / 32;
  const std::vector<float> l = model_like(h, R, kVocab);
  std::vector<std::vector<uint32_t>> masks(R, std::vector<uint32_t>(W, 0));
  std::vector<std::vector<LogitBias>> bias(R);
  std::vector<SampleRow> rows(R);
  for (int64_t r = 0; r < R; ++r) {
    SampleRow& x = rows[r];
    for (int64_t i = 0; i < kVocab; ++i)  // about 1 in 7 allowed, including odd words and the last one
      if ((h.rng()() % 7) == 0) masks[r][i / 32] |= 1u << (i % 32);
    x.temperature = r % 3 == 0 ? 0.0f : 0.9f;
    x.seed = 500 + r, x.step = r, x.logprobs = 2;
    if (r % 4 == 1) x.top_k = 20;
    if (r % 4 == 2) x.top_p = 0.7f;
    bias[r] = {{0, 50.0f}, {123, 40.0f}};  // the strongest tokens, allowed only where the mask says
    x.logit_bias = bias[r];
    x.allowed = masks[r];
  }
  masks[5].assign(W, 0), masks[5][99999 / 32] = 1u << (99999 % 32);  // one token allowed
  rows[5].allowed = masks[5];
  rows[8].allowed = {};                                                // no mask beside masked rows
  rows[10].forced = 7;                                                 // forced: the mask does not apply
  std::vector<SampledToken> g, c;
  run(l, kVocab, rows, &g, &c);
  expect_same(g, c, "masks", &l, kVocab);
  for (int64_t r = 0; r < R; ++r) {
    if (rows[r].allowed.empty() || rows[r].forced >= 0) continue;
    const int32_t id = g[r].id;
    EXPECT_TRUE(id >= 0 && (masks[r][id / 32] >> (id % 32)) & 1u) << "row " << r << " drew disallowed token " << id;
  }
  EXPECT_EQ(g[5].id, 99999);
  EXPECT_EQ(g[10].id, 7);
}

TEST_F(Sampling, EverythingBannedGivesTokenZeroAndTinyVocabulariesWork) {
  for (int64_t V : {1, 10, 1000}) {
    std::vector<float> l(2 * V);
    for (int64_t i = 0; i < 2 * V; ++i) l[i] = std::sin(0.1f * i);
    std::vector<int32_t> all(V);
    std::iota(all.begin(), all.end(), 0);
    std::vector<SampleRow> rows(2);
    rows[0].temperature = 0.0f, rows[0].banned = all, rows[0].logprobs = 2;
    rows[1].temperature = 1.0f, rows[1].top_p = 0.9f, rows[1].seed = 3, rows[1].logprobs = 20;
    std::vector<SampledToken> g, c;
    run(l, V, rows, &g, &c);
    EXPECT_EQ(g[0].id, 0) << "V " << V;
    expect_same(g, c, "vocabulary " + std::to_string(V));
  }
}

TEST_F(Sampling, RowsAreBatchInvariant) {
  HostTensors h(15);
  const int64_t R = 256;
  const std::vector<float> l = model_like(h, R, kVocab);
  std::vector<SampleRow> rows = sampling_rows(l, R, kVocab, 3);
  std::vector<SampledToken> all(R);
  ASSERT_TRUE(gpu_->sample(to_gpu(l, R), rows, all).ok());
  for (int64_t r : {0, 1, 100, 255}) {
    std::vector<float> one(l.begin() + r * kVocab, l.begin() + (r + 1) * kVocab);
    std::vector<SampledToken> single(1);
    ASSERT_TRUE(gpu_->sample(to_gpu(one, 1), std::span(&rows[r], 1), single).ok());
    EXPECT_EQ(single[0].id, all[r].id) << "row " << r << " alone vs in a batch of 256";
  }
}

// The ids of row `l` [V] in rank order (logit descending, lower id first),
// the first n.
std::vector<int32_t> rank_order(const float* l, int64_t V, size_t n) {
  std::vector<int32_t> idx(V);
  std::iota(idx.begin(), idx.end(), 0);
  n = std::min<size_t>(n, V);
  std::partial_sort(idx.begin(), idx.begin() + n, idx.end(), [&](int32_t a, int32_t b) {
    return sample_rank_key(l[a], a) > sample_rank_key(l[b], b);
  });
  idx.resize(n);
  return idx;
}

// A top_p under which both backends keep exactly the first `keep` candidates
// of row `l` at temperature T (after top_k, 0: none; below the drawable
// count): the target midway through candidate keep - 1's weight, so that the
// CPU's fp64 and the GPU's fixed-point masses cannot disagree.
float top_p_keeping(const float* l, int64_t V, float T, int top_k, size_t keep) {
  const std::vector<int32_t> idx = rank_order(l, V, top_k > 0 ? static_cast<size_t>(top_k) : keep);
  const double top = l[idx[0]];
  auto w = [&](float x) { return std::exp((double(x) - top) / T); };  // 0 for -inf
  double sum = 0, c = 0;
  if (top_k > 0)
    for (int32_t i : idx) sum += w(l[i]);
  else
    for (int64_t i = 0; i < V; ++i) sum += std::isnan(l[i]) ? 0.0 : w(l[i]);
  for (size_t i = 0; i < keep; ++i) c += w(l[idx[i]]);
  return static_cast<float>((c - w(l[idx[keep - 1]]) / 2) / sum);
}

// A row whose top 5000 logits are U[5, 10) at random ids and the rest
// N(-5, 1): at T 1 a top-2500 or top-p prefix is longer than block 0's list
// (1024) while the histogram bin it ends in holds ~60 logits.
std::vector<float> long_prefix_row(HostTensors& h, int64_t V) {
  std::vector<float> l = h.randn(V, 1.0f);
  for (float& x : l) x -= 5.0f;
  for (int j = 0; j < 5000; ++j) l[h.rng()() % V] = 5.0f + 5.0f * static_cast<float>(h.rng()() % 1000000) / 1e6f;
  return l;
}

// Every way the kernel finds the kept set (sampling.cu): block 0's sorted
// list (top-k, top-k + top-p, top-p alone, min-p), the crossing bin alone
// (one filter, a kept prefix of ~2500), the radix select (both filters over
// a long prefix; logits of ~1e7, beyond the histogram's range).
TEST_F(Sampling, EveryCutPathMatchesTheCpu) {
  HostTensors h(16);
  const int64_t V = kVocab;
  const std::vector<float> model = model_like(h, 1, V), flat = long_prefix_row(h, V);
  std::vector<float> uniform(V), huge = h.randn(V, 1e7f);
  for (float& x : uniform) x = static_cast<float>(static_cast<int32_t>(h.rng()() >> 40) - (1 << 23)) / (1 << 23);
  std::vector<std::vector<float>> l;
  std::vector<SampleRow> rows;
  auto add = [&](const std::vector<float>& row, float T, int top_k, float top_p, float min_p = 0.0f) {
    l.push_back(row);
    rows.emplace_back();
    rows.back().temperature = T, rows.back().top_k = top_k, rows.back().top_p = top_p, rows.back().min_p = min_p;
  };
  add(model, 2.0f, 40, 1.0f);                                            // list: top-k
  add(model, 2.0f, 40, top_p_keeping(model.data(), V, 2.0f, 40, 7));     // list: top-k, then top-p
  add(model, 0.5f, 0, top_p_keeping(model.data(), V, 0.5f, 0, 5));       // list: top-p by mass
  add(uniform, 1.0f, 40, top_p_keeping(uniform.data(), V, 1.0f, 40, 30));  // the kernel bench's rows
  {
    const std::vector<int32_t> idx = rank_order(model.data(), V, 6);
    const double w4 = std::exp((double(model[idx[4]]) - model[idx[0]]) / 2.0);
    const double w5 = std::exp((double(model[idx[5]]) - model[idx[0]]) / 2.0);
    add(model, 2.0f, 40, 1.0f, static_cast<float>((w4 + w5) / 2));        // list: top-k and min-p
  }
  add(flat, 1.0f, 2500, 1.0f);                                            // crossing bin: top-k
  add(flat, 1.0f, 0, top_p_keeping(flat.data(), V, 1.0f, 0, 2500));       // crossing bin: top-p
  add(flat, 1.0f, 3000, top_p_keeping(flat.data(), V, 1.0f, 3000, 2000));  // radix: both filters
  add(huge, 1e7f, 40, 1.0f);                                              // radix: distances > 2^16
  draw_copies(l, rows, 6, V, "cut paths");
}

// Ties at the top-k threshold: distinct leaders, then a group of equal
// logits at ids spread over every block of the cluster; top-k (and top-p)
// cut inside the group, so only its lowest ids are kept and drawn. 20
// leaders and 300 tied: block 0's list; 500 and 800 with top-k alone: the
// crossing bin; 20 and 3000, or top-k with top-p: the radix select.
TEST_F(Sampling, TopKTiesKeepTheLowestIds) {
  HostTensors h(17);
  const int64_t V = kVocab;
  struct Case {
    int leaders, group, top_k;
  };
  for (const Case& k : {Case{20, 300, 100}, Case{500, 800, 700}, Case{20, 3000, 100}}) {
    std::vector<float> row = h.randn(V, 1.0f);  // all below 6
    std::vector<int32_t> tied;                   // even ids, ascending
    for (int j = 0; j < k.group; ++j) tied.push_back(static_cast<int32_t>(2 * (j * (V / (2 * k.group))) + 2));
    for (int32_t id : tied) row[id] = 6.0f;
    for (int j = 0; j < k.leaders; ++j) row[2 * (j * (V / (2 * k.leaders))) + 1] = 7.0f + 0.001f * j;  // odd ids
    std::vector<SampleRow> rows(2);
    for (SampleRow& x : rows) x.temperature = 20.0f, x.top_k = k.top_k;
    const size_t keep[2] = {static_cast<size_t>(k.top_k), static_cast<size_t>(k.leaders + 40)};
    rows[1].top_p = top_p_keeping(row.data(), V, 20.0f, k.top_k, keep[1]);
    const int copies = 16;
    const std::string what = std::to_string(k.leaders) + " leaders, " + std::to_string(k.group) + " tied";
    const std::vector<SampledToken> g = draw_copies({row, row}, rows, copies, V, what);
    const std::vector<int32_t> kept[2] = {rank_order(row.data(), V, keep[0]), rank_order(row.data(), V, keep[1])};
    for (size_t i = 0; i < g.size(); ++i) {
      const std::vector<int32_t>& in = kept[i / copies];
      EXPECT_NE(std::find(in.begin(), in.end(), g[i].id), in.end()) << what << ", draw " << i << ": " << g[i].id;
      if (row[g[i].id] == 6.0f) {
        EXPECT_LT(g[i].id, tied[in.size() - k.leaders]) << what << ", draw " << i;
      }
    }
  }
}

// All-equal logits (one bin holding the row: the radix select; 1000 of
// them: the list with ties only), -inf logits (fewer drawable tokens than
// top_k: top-k off; -inf just below the top-k threshold; one drawable
// token), top_k = vocab - 1 (the crossing bin), and min-p alone.
TEST_F(Sampling, EqualAndInfiniteLogitsMatchTheCpu) {
  HostTensors h(18);
  const int64_t V = kVocab;
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> equal(V, 0.25f), model = model_like(h, 1, V);
  std::vector<float> few(V, -inf), fringe(V, -inf), one(V, -inf);
  for (int j = 0; j < 30; ++j) few[j * 6661 + 5] = h.normal();
  for (int j = 0; j < 45; ++j) fringe[j * 4441 + 3] = h.normal();
  one[123456] = -3.0f;
  std::vector<std::vector<float>> l;
  std::vector<SampleRow> rows;
  auto add = [&](const std::vector<float>& row, int top_k, float top_p, float min_p = 0.0f) {
    l.push_back(row);
    rows.emplace_back();
    rows.back().temperature = 1.0f, rows.back().top_k = top_k, rows.back().top_p = top_p, rows.back().min_p = min_p;
  };
  add(equal, 40, 1.0f);
  add(equal, 0, 0.5f);  // exactly the first half: both backends' masses are exact here
  add(few, 40, top_p_keeping(few.data(), V, 1.0f, 0, 10));
  add(fringe, 40, 1.0f);
  add(one, 0, 0.3f);
  add(model, static_cast<int>(V - 1), 1.0f);
  add(model, 0, 1.0f, 0.01f);
  draw_copies(l, rows, 4, V, "equal and infinite logits");

  std::vector<SampleRow> small(8);
  std::vector<float> ls(8 * 1000, 0.25f);
  for (int r = 0; r < 8; ++r) small[r].temperature = 1.0f, small[r].top_k = 40, small[r].seed = r;
  std::vector<SampledToken> g, cpu;
  run(ls, 1000, small, &g, &cpu);
  expect_same(g, cpu, "1000 equal logits");
  for (const SampledToken& t : g) EXPECT_LT(t.id, 40);
}

// Vocabularies whose blocks' shares are not 16-byte aligned (4-byte loads)
// and whose last block holds a partial share.
TEST_F(Sampling, OddVocabulariesMatchTheCpu) {
  for (int64_t V : {4099, 5001, 200063}) {
    HostTensors h(19 + V);
    const int64_t R = 6;
    const std::vector<float> l = model_like(h, R, V);
    std::vector<SampledToken> g, c;
    run(l, V, sampling_rows(l, R, V, 5), &g, &c);
    expect_same(g, c, "vocabulary " + std::to_string(V), &l, V);
  }
}

TEST_F(Sampling, DrawsFollowTheSoftmax) {
  // 8 likely tokens spread over the vocabulary (all blocks of the cluster),
  // the rest negligible: frequencies of 512 x 40 draws at fresh (seed, step)
  // pairs against softmax(l / T); chi-square with 7 degrees of freedom below
  // 24.3 (p = 0.001).
  const int64_t R = 512;
  const std::vector<int32_t> ids = {3, 25000, 50001, 75002, 100003, 125004, 150005, 200063};
  const std::vector<float> lv = {1.0f, 0.5f, 0.0f, -0.5f, 1.5f, 0.25f, -1.0f, 0.75f};
  const float T = 0.8f;
  std::vector<float> one(kVocab, -60.0f);
  for (size_t i = 0; i < ids.size(); ++i) one[ids[i]] = lv[i];
  std::vector<float> l(R * kVocab);
  for (int64_t r = 0; r < R; ++r) std::copy(one.begin(), one.end(), l.begin() + r * kVocab);
  Act g = to_gpu(l, R);
  std::vector<double> freq(ids.size(), 0);
  int draws = 0;
  for (int rep = 0; rep < 40; ++rep) {
    std::vector<SampleRow> rows(R);
    for (int64_t r = 0; r < R; ++r) rows[r].temperature = T, rows[r].seed = 0x9e3779b97f4a7c15ull * (rep + 1) + r, rows[r].step = rep;
    std::vector<SampledToken> out(R);
    ASSERT_TRUE(gpu_->sample(g, rows, out).ok());
    for (const SampledToken& t : out) {
      const auto it = std::find(ids.begin(), ids.end(), t.id);
      ASSERT_NE(it, ids.end()) << "drew the negligible token " << t.id;
      freq[it - ids.begin()] += 1;
      ++draws;
    }
  }
  double z = 0;
  for (float v : lv) z += std::exp(v / T);
  double chi2 = 0;
  for (size_t i = 0; i < ids.size(); ++i) {
    const double want = draws * std::exp(lv[i] / T) / z;
    chi2 += (freq[i] - want) * (freq[i] - want) / want;
  }
  EXPECT_LT(chi2, 24.3) << "draw frequencies do not follow softmax(l / T)";
}

TEST_F(Sampling, MemoryInfoReportsTheDevice) {
  const MemoryInfo m = gpu_->memory_info();
  EXPECT_GT(m.total_bytes, size_t{1} << 30);
  EXPECT_LE(m.free_bytes, m.total_bytes);
}

}  // namespace
}  // namespace m2::test
