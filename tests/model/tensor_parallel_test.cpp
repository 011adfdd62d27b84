// The tensor- and expert-parallel forward (ranks as threads, each its own
// CPU backend, weight shard and KV cache) against the unsharded forward on
// the same weights, which tests/model/reference_test.cpp holds to the
// float64 transformers reference: every position's logits and the greedy
// continuation through the KV cache.
//
// Bound: max |Δ| <= 2e-4 on logits of std ~1, the bound the reference test
// holds chunked and batched steps on backends that sum in another order to.
// Sharding only reassociates fp32 sums: o_proj's and the MoE's dot products
// are split at the rank boundaries and the partial sums added in rank order,
// the QK norm's sum of squares is rounded to fp32 per rank before the
// all-reduce; nothing else changes (measured: ~1e-6, printed below). Greedy
// ids: identical.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <thread>

#include "model/dummy_values.h"
#include "model/greedy.h"
#include "model/minimax_m2.h"
#include "model/tensor_parallel.h"
#include "model/weight_shard.h"
#include "test_paths.h"

namespace m2 {
namespace {

double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return INFINITY;
  double m = 0;
  for (size_t i = 0; i < a.size(); ++i) m = std::max(m, static_cast<double>(std::abs(a[i] - b[i])));
  return m;
}

Result<std::unique_ptr<MiniMaxM2>> make_group(const ModelWeights& w, int tp, bool ep) {
  ParallelConfig p;
  p.tensor_parallel_size = tp;
  p.expert_parallel = ep;
  return MiniMaxM2::tensor_parallel(w, p, [](int) -> Result<std::unique_ptr<Backend>> { return make_cpu_backend(1); });
}

struct Case {
  std::string fixture;  // tests/data/<fixture>, or "" for the dummy model below
  int tp;
  bool ep;
};

void PrintTo(const Case& c, std::ostream* os) {
  *os << (c.fixture.empty() ? "dummy" : c.fixture) << " tp " << c.tp << (c.ep ? " ep" : "");
}

std::string case_name(const ::testing::TestParamInfo<Case>& i) {
  std::string f = i.param.fixture.empty() ? "dummy16heads" : i.param.fixture;
  std::replace(f.begin(), f.end(), '-', '_');
  return f + "_tp" + std::to_string(i.param.tp) + (i.param.ep ? "_ep" : "");
}

// 16 q heads over 4 kv heads: tp 8 splits the q heads and replicates each kv
// head on two ranks (the tiny fixtures have 4 and 12 q heads).
ModelConfig dummy_config() {
  auto c = load_config_from(test::data_path("m2-tiny-bf16"));
  EXPECT_TRUE(c.ok());
  ModelConfig m = *c;
  m.num_attention_heads = 16;
  m.num_key_value_heads = 4;
  return m;
}

class TensorParallel : public ::testing::TestWithParam<Case> {
 protected:
  void SetUp() override {
    const Case& c = GetParam();
    auto w = c.fixture.empty() ? make_dummy_weights(dummy_config(), 7) : load_model(test::data_path(c.fixture), LoadOptions{});
    ASSERT_TRUE(w.ok()) << w.status().message();
    weights_ = std::move(w.value());
    backend_ = make_cpu_backend();
    ASSERT_TRUE(backend_->prepare_weights(*weights_).ok());
    single_ = std::make_unique<MiniMaxM2>(*weights_, *backend_);
    auto g = make_group(*weights_, c.tp, c.ep);
    ASSERT_TRUE(g.ok()) << g.status().message();
    group_ = std::move(g.value());
    ASSERT_EQ(group_->parallel_size(), c.tp);
    if (c.fixture == "m2-aligned-fp8") {
      auto j = read_json_file(test::data_path("reference/m2-aligned-fp8/prompt.json"));
      ASSERT_TRUE(j.ok());
      prompt_ = (*j)["prompt_ids"].get<std::vector<int32_t>>();
    } else if (!c.fixture.empty()) {
      prompt_ = test::load_reference(c.fixture).prompt;
    } else {
      for (int i = 0; i < 96; ++i) prompt_.push_back((i * 37 + 11) % weights_->config.vocab_size);
    }
  }
  std::unique_ptr<ModelWeights> weights_;
  std::unique_ptr<Backend> backend_;
  std::unique_ptr<MiniMaxM2> single_, group_;
  std::vector<int32_t> prompt_;
};

TEST_P(TensorParallel, LogitsOfEveryPositionEqualTheUnshardedForward) {
  auto want = all_logits(*single_, prompt_, DType::kF32);
  auto got = all_logits(*group_, prompt_, DType::kF32);
  ASSERT_TRUE(want.ok() && got.ok()) << got.status().message();
  const double d = max_abs_diff(*got, *want);
  std::printf("max |logit delta| %.3g over %zu positions\n", d, prompt_.size());
  EXPECT_LE(d, 2e-4);
}

TEST_P(TensorParallel, GreedyIdsThroughTheKvCacheAreIdentical) {
  GreedyOptions o;
  o.max_tokens = 12;
  o.ignore_eos = true;
  o.prefill_chunk = 7;  // prefill chunks, then decodes reading the ranks' caches
  const std::span<const int32_t> prompt = std::span(prompt_).first(std::min<size_t>(prompt_.size(), 24));
  auto want = generate_greedy(*single_, prompt, o);
  auto got = generate_greedy(*group_, prompt, o);
  ASSERT_TRUE(want.ok() && got.ok()) << got.status().message();
  EXPECT_EQ(*got, *want);
}

// Routing capture and replay (docs/rollout.md) through a group: every rank
// routes the same reduced hidden state, rank 0's choice comes back.
TEST_P(TensorParallel, CapturedAndReplayedRoutingMatchTheUnsharded) {
  const std::span<const int32_t> prompt = std::span(prompt_).first(std::min<size_t>(prompt_.size(), 16));
  auto capture = [&](MiniMaxM2& m, const std::vector<int32_t>& forced, std::vector<float>* logits) {
    SingleSequence seq(m, static_cast<int64_t>(prompt.size()), 16, DType::kF32);
    StepInput in = seq.step(prompt, 0, true);
    in.capture_routing = true;
    in.forced_experts = forced;
    const Status s = m.forward(in, *seq.cache, logits);
    EXPECT_TRUE(s.ok()) << s.message();
    return std::vector<int32_t>(m.last_routing().begin(), m.last_routing().end());
  };
  std::vector<float> want_logits, got_logits;
  const std::vector<int32_t> want = capture(*single_, {}, &want_logits);
  EXPECT_EQ(capture(*group_, {}, &got_logits), want);
  // Replay another choice (each row's experts rotated by one): both follow it alike.
  std::vector<int32_t> forced = want;
  const int E = weights_->config.num_local_experts;
  for (int32_t& e : forced) e = (e + 1) % E;
  EXPECT_EQ(capture(*single_, forced, &want_logits), forced);
  EXPECT_EQ(capture(*group_, forced, &got_logits), forced);
  EXPECT_LE(max_abs_diff(got_logits, want_logits), 2e-4);
}

// generate_greedy's routing capture ([rows, layers, top_k] over the prompt
// and every generated token but the last) is the model's per-step capture
// ([layers, T, top_k]) transposed, and replaying it at tp N gives the
// unsharded ids: the comparison m2cpp generate --routing-capture /
// --routing-replay makes on the GPU, where near-tied routers part the runs.
TEST_P(TensorParallel, GreedyUnderTheUnshardedRoutingGivesItsIds) {
  const std::span<const int32_t> prompt = std::span(prompt_).first(std::min<size_t>(prompt_.size(), 16));
  const int64_t L = weights_->config.num_hidden_layers, k = weights_->config.num_experts_per_tok;
  const int64_t P = static_cast<int64_t>(prompt.size());
  std::vector<int32_t> routing, replayed;
  GreedyOptions o;
  o.max_tokens = 10;
  o.ignore_eos = true;
  o.routing_out = &routing;
  auto want = generate_greedy(*single_, prompt, o);
  ASSERT_TRUE(want.ok()) << want.status().message();
  ASSERT_EQ(static_cast<int64_t>(routing.size()), (P + o.max_tokens - 1) * L * k);
  {  // the prompt's rows are the one prefill step's capture, transposed
    SingleSequence seq(*single_, P, 16, DType::kF32);
    StepInput in = seq.step(prompt, 0, false);
    in.capture_routing = true;
    std::vector<float> logits;
    ASSERT_TRUE(single_->forward(in, *seq.cache, &logits).ok());
    const std::span<const int32_t> step = single_->last_routing();
    for (int64_t t = 0; t < P; ++t) {
      for (int64_t l = 0; l < L; ++l) {
        for (int64_t j = 0; j < k; ++j) ASSERT_EQ(routing[(t * L + l) * k + j], step[(l * P + t) * k + j]);
      }
    }
  }
  o.routing_in = routing;
  o.routing_out = &replayed;
  o.prefill_chunk = 5;  // replay rows land in every step of a chunked prefill
  auto got = generate_greedy(*group_, prompt, o);
  ASSERT_TRUE(got.ok()) << got.status().message();
  EXPECT_EQ(*got, *want);
  EXPECT_EQ(replayed, routing);
  // A replay covering fewer rows than are stepped routes the rest freely;
  // more rows than are stepped is refused, naming the counts.
  o.routing_in = std::span(routing).first(static_cast<size_t>(3 * L * k));
  auto part = generate_greedy(*group_, prompt, o);
  ASSERT_TRUE(part.ok()) << part.status().message();
  EXPECT_EQ(*part, *want);
  std::vector<int32_t> longer = routing;
  longer.resize(routing.size() + static_cast<size_t>(L * k), 0);
  o.routing_in = longer;
  auto refused = generate_greedy(*group_, prompt, o);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("for at most the " + std::to_string(P + o.max_tokens - 1) + " rows"),
            std::string::npos)
      << refused.status().message();
}

INSTANTIATE_TEST_SUITE_P(Cpu, TensorParallel,
                         ::testing::Values(Case{"m2-tiny-bf16", 2, false},    // 2 q / 1 kv head per rank
                                           Case{"m2-tiny-bf16", 4, false},    // kv heads replicated (2 over 4 ranks)
                                           Case{"m2-tiny-bf16", 2, true},     // 4 of 8 experts per rank
                                           Case{"m2-tiny-bf16", 4, true},
                                           Case{"m2-aligned-fp8", 2, false},  // FP8 slices on the 128 blocks
                                           Case{"m2-aligned-fp8", 4, true},   // 1 of 4 experts, kv replicated
                                           Case{"", 8, false},                // 8 ranks, kv on 2 ranks each
                                           Case{"", 8, true}),                // 1 of 8 experts per rank
                         case_name);

TEST(TensorParallelConfig, RefusesWhatDoesNotSplitNamingTheValue) {
  auto c = load_config_from(test::data_path("m2-tiny-bf16"));  // 4 q heads, 2 kv heads, 8 experts of 96
  ASSERT_TRUE(c.ok());
  auto msg = [](const ModelConfig& m, int tp, bool ep) {
    ParallelConfig p;
    p.tensor_parallel_size = tp, p.expert_parallel = ep;
    const Status s = check_parallel(m, p);
    return s.ok() ? std::string("ok") : s.message();
  };
  EXPECT_EQ(msg(*c, 1, false), "ok");
  EXPECT_EQ(msg(*c, 4, false), "ok");
  EXPECT_NE(msg(*c, 3, false).find("3 does not divide the model's 4 attention heads"), std::string::npos);
  EXPECT_NE(msg(*c, 8, false).find("8 does not divide the model's 4 attention heads"), std::string::npos);
  ModelConfig m = *c;
  m.num_attention_heads = 12, m.num_key_value_heads = 4;
  EXPECT_NE(msg(m, 6, false).find("6 over 4 kv heads"), std::string::npos);
  m = *c;
  m.intermediate_size = 90;
  EXPECT_NE(msg(m, 4, false).find("intermediate size 90"), std::string::npos);
  EXPECT_EQ(msg(m, 4, true), "ok");
  m = *c;
  m.num_local_experts = 6;
  EXPECT_NE(msg(m, 4, true).find("4 does not divide the model's 6 experts"), std::string::npos);
  auto f = load_config_from(test::data_path("m2-aligned-fp8"));  // FP8, 128-blocks, I = 256, 12 q heads of 128
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(msg(*f, 2, false), "ok");
  EXPECT_NE(msg(*f, 4, false).find("rows of w1 is 64 wide, not a multiple of the FP8 scale block 128"), std::string::npos)
      << msg(*f, 4, false);
  EXPECT_EQ(msg(*f, 4, true), "ok");
  auto t = load_config_from(test::data_path("m2-tiny-fp8"));  // FP8 with head_dim 64: a kv head is half a block
  ASSERT_TRUE(t.ok());
  EXPECT_NE(msg(*t, 2, true).find("k_proj is 64 wide"), std::string::npos) << msg(*t, 2, true);
}

// A vocabulary tp does not divide (500 over 8 ranks): the lm_head is
// replicated and rank 0 alone computes the logits.
TEST(TensorParallelConfig, AVocabularyTpDoesNotDivideKeepsTheLmHeadWhole) {
  ModelConfig c = dummy_config();
  c.vocab_size = 500;
  auto w = make_dummy_weights(c, 3);
  ASSERT_TRUE(w.ok()) << w.status().message();
  ParallelConfig p;
  p.tensor_parallel_size = 8;
  auto s = shard_weights(**w, p, 5);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ((*s)->lm_head.weight.data, (*w)->lm_head.weight.data);
  EXPECT_EQ((*s)->embed.data, (*w)->embed.data);  // and the embedding whole
  EXPECT_EQ((*s)->embed_first_id, 0);
  auto cpu = make_cpu_backend();
  MiniMaxM2 single(**w, *cpu);
  auto g = make_group(**w, 8, false);
  ASSERT_TRUE(g.ok()) << g.status().message();
  std::vector<int32_t> ids;
  for (int i = 0; i < 40; ++i) ids.push_back((i * 53 + 5) % 500);
  auto want = all_logits(single, ids, DType::kF32), got = all_logits(**g, ids, DType::kF32);
  ASSERT_TRUE(want.ok() && got.ok());
  EXPECT_LE(max_abs_diff(*got, *want), 2e-4);
}

// What a rank holds (weight_shard.h): views of its rows, strided views of its
// columns (no copy of a weight), its vocabulary rows, its experts (EP) or
// expert columns.
TEST(TensorParallelConfig, ARankHoldsItsSlices) {
  auto w = load_model(test::data_path("m2-tiny-bf16"), LoadOptions{});  // 4 q x 64, 2 kv heads, V 512, 8 experts x 96
  ASSERT_TRUE(w.ok());
  const ModelWeights& full = **w;
  const LayerWeights& L = full.layers[0];
  auto byte = [](const TensorView& t, int64_t elems) { return static_cast<const uint8_t*>(t.data) + elems * 2; };
  ParallelConfig p;
  p.tensor_parallel_size = 4;  // one q head, the kv heads replicated on 2 ranks each
  auto s = shard_weights(full, p, 3);
  ASSERT_TRUE(s.ok()) << s.status().message();
  const LayerWeights& R = (*s)->layers[0];
  EXPECT_EQ((*s)->config.num_attention_heads, 1);
  EXPECT_EQ((*s)->config.num_key_value_heads, 1);
  EXPECT_EQ((*s)->config.intermediate_size, 24);
  EXPECT_EQ(R.q_proj.weight.shape, (Shape{64, 192}));
  EXPECT_EQ(R.q_proj.weight.data, byte(L.q_proj.weight, 3 * 64 * 192));  // q head 3: a view
  EXPECT_EQ(R.k_proj.weight.data, byte(L.k_proj.weight, 1 * 64 * 192));  // kv head 3 * 2 / 4 = 1
  EXPECT_EQ(R.k_norm.data, byte(L.k_norm, 64));
  EXPECT_EQ(R.o_proj.weight.shape, (Shape{192, 64}));  // columns 192..255: rows 256 apart
  EXPECT_EQ(R.o_proj.weight.data, byte(L.o_proj.weight, 192));
  EXPECT_EQ(R.o_proj.ld(), 256);
  EXPECT_FALSE(R.o_proj.contiguous());
  EXPECT_EQ((*s)->lm_head.weight.shape, (Shape{128, 192}));
  EXPECT_EQ((*s)->lm_head.weight.data, byte(full.lm_head.weight, 3 * 128 * 192));
  EXPECT_EQ((*s)->embed.shape, (Shape{128, 192}));  // the same vocabulary rows, looked up from id 384
  EXPECT_EQ((*s)->embed.data, byte(full.embed, 3 * 128 * 192));
  EXPECT_EQ((*s)->embed_first_id, 3 * 128);
  EXPECT_EQ(R.experts[0].w1.weight.shape, (Shape{24, 192}));
  EXPECT_EQ(R.experts[0].w2.weight.shape, (Shape{192, 24}));
  EXPECT_EQ(R.experts[0].w2.weight.data, byte(L.experts[0].w2.weight, 72));  // columns 72..95 of 96
  EXPECT_EQ(R.experts[0].w2.ld(), 96);
  EXPECT_TRUE((*s)->owned.empty());  // BF16: not even scales to copy
  p.expert_parallel = true;
  auto e = shard_weights(full, p, 1);  // experts 2 and 3, whole
  ASSERT_TRUE(e.ok());
  for (int x = 0; x < 8; ++x) {
    const ExpertWeights& X = (*e)->layers[0].experts[x];
    EXPECT_EQ(X.w1.weight.empty(), x != 2 && x != 3) << x;
    if (!X.w1.weight.empty()) {
      EXPECT_EQ(X.w2.weight.data, L.experts[x].w2.weight.data);
    }
  }
}

// Dummy FP8 weights a GPU generates (LoadOptions::dummy_fp8_on_device) have
// no host bytes: a shard's row slices view the tensors' placeholders at their
// first element, and its column slices (o_proj, w2) are placeholders of their
// own whose window (ModelWeights::DummyFp8) names the tensor's elements. The
// element each describes is the byte the host fill writes for the same seed.
TEST(TensorParallelConfig, DummyFp8ShardsDescribeTheHostFillsBytes) {
  auto cfg = load_config_from(test::data_path("m2-aligned-fp8"));
  ASSERT_TRUE(cfg.ok());
  auto host = make_dummy_weights(*cfg, 7, false);
  auto dev = make_dummy_weights(*cfg, 7, true);
  ASSERT_TRUE(host.ok() && dev.ok());
  ASSERT_FALSE((*dev)->dummy_fp8.empty());
  ParallelConfig p;
  p.tensor_parallel_size = 2;
  auto hs = shard_weights(**host, p, 1);
  auto ds = shard_weights(**dev, p, 1);
  ASSERT_TRUE(hs.ok() && ds.ok()) << ds.status().message();
  const DummyFp8Table table = dummy_fp8_table();
  // The byte the shard `ds` describes at element k of `t`.
  auto described = [&](const TensorView& t, int64_t k) -> int {
    auto it = (*ds)->dummy_fp8.upper_bound(t.data);
    if (it == (*ds)->dummy_fp8.begin()) return -1;
    --it;
    const ModelWeights::DummyFp8& d = it->second;
    const int64_t off = static_cast<const uint8_t*>(t.data) - static_cast<const uint8_t*>(it->first) + k;
    if (off >= d.elements) return -1;
    const int64_t full = d.cols == 0 ? off : (off / d.cols) * d.full_cols + d.col_begin + off % d.cols;
    return table.code[dummy_fp8_index(d.seed, full)];
  };
  auto expect_same = [&](const Linear& h, const Linear& d, const char* what) {
    ASSERT_EQ(h.weight.shape, d.weight.shape) << what;
    ASSERT_EQ(h.weight.dtype, DType::kF8E4M3) << what;
    const auto* bytes = static_cast<const uint8_t*>(h.weight.data);  // FP8: a byte an element
    const int64_t cols = h.in_features();
    int wrong = 0;
    for (int64_t k = 0; k < h.weight.shape.numel(); ++k) wrong += described(d.weight, k) != bytes[k / cols * h.ld() + k % cols];
    EXPECT_EQ(wrong, 0) << what << ": " << h.weight.shape.numel() << " elements";
    ASSERT_EQ(h.scale_inv.shape.numel(), d.scale_inv.shape.numel()) << what;
    EXPECT_EQ(std::memcmp(h.scale_inv.data, d.scale_inv.data, h.scale_inv.shape.numel() * 4), 0) << what << " scales";
  };
  const LayerWeights &H = (*hs)->layers[0], &D = (*ds)->layers[0];
  expect_same(H.q_proj, D.q_proj, "q_proj (rows)");
  expect_same(H.o_proj, D.o_proj, "o_proj (columns)");
  expect_same(H.experts[1].w1, D.experts[1].w1, "expert 1 w1 (rows)");
  expect_same(H.experts[1].w2, D.experts[1].w2, "expert 1 w2 (columns)");
}

// `m2cpp info -tp`'s per-rank bytes (tensor_share, by tensor name) are the
// bytes of the shard shard_weights builds.
TEST(TensorParallelConfig, TensorSharesAddUpToTheShardsBytes) {
  auto linear = [](const Linear& l) { return (l.weight.empty() ? 0 : l.weight.nbytes()) + (l.scale_inv.empty() ? 0 : l.scale_inv.nbytes()); };
  auto vec = [](const TensorView& t) { return t.empty() ? size_t{0} : t.nbytes(); };
  for (auto [fixture, tp, ep] : {std::tuple{"m2-tiny-bf16", 2, false}, std::tuple{"m2-tiny-bf16", 4, true},
                                 std::tuple{"m2-aligned-fp8", 2, false}, std::tuple{"m2-aligned-fp8", 4, true}}) {
    auto w = load_model(test::data_path(fixture), LoadOptions{});
    ASSERT_TRUE(w.ok());
    ParallelConfig p;
    p.tensor_parallel_size = tp, p.expert_parallel = ep;
    for (int rank = 0; rank < tp; ++rank) {
      auto s = shard_weights(**w, p, rank);
      ASSERT_TRUE(s.ok()) << s.status().message();
      const ModelWeights& m = **s;
      size_t held = vec(m.embed) + vec(m.final_norm) + (m.config.tie_word_embeddings ? 0 : linear(m.lm_head));
      // Every weight a view of the loaded tensor's bytes (column slices too).
      auto inside = [](const Linear& part, const Linear& whole) {
        const auto* p = static_cast<const uint8_t*>(part.weight.data);
        const auto* b = static_cast<const uint8_t*>(whole.weight.data);
        return part.weight.empty() || (p >= b && p < b + whole.weight.nbytes());
      };
      for (size_t i = 0; i < m.layers.size(); ++i) {
        const LayerWeights &L = m.layers[i], &F = (*w)->layers[i];
        EXPECT_TRUE(inside(L.o_proj, F.o_proj)) << fixture << " layer " << i;
        for (size_t e = 0; e < L.experts.size(); ++e) EXPECT_TRUE(inside(L.experts[e].w2, F.experts[e].w2)) << e;
      }
      for (const LayerWeights& L : m.layers) {
        held += vec(L.input_norm) + vec(L.post_attention_norm) + vec(L.q_norm) + vec(L.k_norm) + vec(L.router) +
                vec(L.router_bias) + linear(L.q_proj) + linear(L.k_proj) + linear(L.v_proj) + linear(L.o_proj);
        for (const ExpertWeights& e : L.experts) held += linear(e.w1) + linear(e.w2) + linear(e.w3);
      }
      size_t shares = 0;
      for (const TensorSpec& t : expected_tensors((*w)->config)) {
        const TensorShare sh = tensor_share((*w)->config, p, rank, t.name);
        shares += static_cast<size_t>(t.shape.numel()) * dtype_size(t.dtype) * sh.num / sh.den;
      }
      EXPECT_EQ(shares, held) << fixture << " tp " << tp << (ep ? " ep" : "") << " rank " << rank;
    }
  }
}

TEST(TensorParallelConfig, AGroupRefusesAnotherModelsCache) {
  auto w = load_model(test::data_path("m2-tiny-bf16"), LoadOptions{});
  ASSERT_TRUE(w.ok());
  auto g = make_group(**w, 2, false);
  ASSERT_TRUE(g.ok());
  auto cpu = make_cpu_backend();
  MiniMaxM2 single(**w, *cpu);
  SingleSequence seq(single, 4, 16, DType::kF32);  // an ordinary cache
  std::vector<float> logits;
  const std::vector<int32_t> ids = {1, 2, 3};
  const Status s = (*g)->forward(seq.step(ids, 0, true), *seq.cache, &logits);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("0 rank caches for a group of 2"), std::string::npos) << s.message();
}

// A rank that fails alone (here: before a collective the others enter)
// stops the others with its error instead of leaving them waiting: the
// waiting ranks' collectives throw CollectiveAborted naming the failed rank,
// later collectives too, and the group's run() returns the failure itself.
TEST(TensorParallelFailure, ARankThatAbortsStopsTheOthersCollectives) {
  auto comms = make_local_communicators(3);
  std::vector<std::string> seen(3);
  std::vector<std::thread> t;
  for (int r : {0, 2})
    t.emplace_back([&, r] {
      std::vector<float> v(8, 1.0f);
      try {
        comms[r]->all_reduce_sum(v.data(), 8);
      } catch (const CollectiveAborted& e) {
        seen[r] = e.what();
      }
    });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // (the others already waiting)
  comms[1]->abort("out of memory on purpose");
  for (auto& x : t) x.join();
  for (int r : {0, 2}) EXPECT_EQ(seen[r], "tensor-parallel rank 1 of 3 failed: out of memory on purpose") << r;
  EXPECT_THROW(comms[0]->barrier(), CollectiveAborted);  // later collectives stop at once
}

TEST(TensorParallelFailure, AGroupReturnsTheFailingRanksErrorNotAHang) {
  auto w = load_model(test::data_path("m2-tiny-bf16"), LoadOptions{});
  ASSERT_TRUE(w.ok()) << w.status().message();
  ParallelConfig p;
  p.tensor_parallel_size = 2;
  auto g = TensorParallelGroup::create(**w, p, [](int) -> Result<std::unique_ptr<Backend>> { return make_cpu_backend(1); });
  ASSERT_TRUE(g.ok()) << g.status().message();
  TensorParallelGroup& group = **g;
  const Status s = group.run([&](int r) -> Status {
    if (r == 1) return errorf("rank one's disk went away");
    std::vector<float> v(4, 1.0f);
    group.comm(r).all_reduce_sum(v.data(), 4);  // waits for rank 1, which never comes
    return Status();
  });
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.message(), "rank one's disk went away");
  // The group is unusable afterwards, and says why on every rank.
  const Status again = group.run([&](int r) -> Status {
    group.comm(r).barrier();
    return Status();
  });
  EXPECT_NE(again.message().find("rank 1 of 2 failed: rank one's disk went away"), std::string::npos) << again.message();
}

}  // namespace
}  // namespace m2
