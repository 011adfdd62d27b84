// The engine end to end on the CPU backend: batch invariance, chunked
// prefill, preemption, prefix reuse across agentic turns, n > 1, abort,
// stop conditions.
#include "engine/engine.h"
#include "model/greedy.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <random>

#include "util/json.h"

namespace m2 {
namespace {

std::string data(const std::string& rel) { return std::string(M2CPP_SOURCE_DIR) + "/tests/data/" + rel; }

class EngineTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto w = load_model(data("m2-tiny-bf16"), LoadOptions{});
    ASSERT_TRUE(w.ok()) << w.status().message();
    weights_ = std::move(w.value());
    backend_ = make_cpu_backend();
    model_ = std::make_unique<MiniMaxM2>(*weights_, *backend_);
  }

  std::unique_ptr<Engine> engine(int64_t budget, int64_t num_blocks = 256, int block_size = 16, int max_seqs = 64) {
    EngineConfig c;
    c.block_size = block_size;
    c.num_blocks = num_blocks;
    c.kv_dtype = DType::kF32;
    c.scheduler.max_num_batched_tokens = budget;
    c.scheduler.max_num_seqs = max_seqs;
    auto e = Engine::create(*model_, nullptr, c);
    EXPECT_TRUE(e.ok()) << e.status().message();
    return std::move(e.value());
  }

  // Runs everything to completion; returns each request's tokens.
  static std::map<std::string, std::vector<int32_t>> run_all(Engine& e) {
    std::map<std::string, std::vector<int32_t>> out;
    for (int guard = 0; e.has_unfinished() && guard < 100000; ++guard) {
      auto step = e.step();
      EXPECT_TRUE(step.ok()) << step.status().message();
      for (const auto& o : *step) {
        const std::string key = fmt::format("{}/{}", o.request_id, o.index);
        out[key].insert(out[key].end(), o.new_token_ids.begin(), o.new_token_ids.end());
      }
    }
    return out;
  }

  static SamplingParams greedy(int max_tokens) {
    SamplingParams p;
    p.temperature = 0.0f;
    p.max_tokens = max_tokens;
    p.ignore_eos = true;
    return p;
  }

  std::vector<std::vector<int32_t>> prompts(int count, uint32_t seed) {
    std::mt19937 rng(seed);
    std::vector<std::vector<int32_t>> ps;
    for (int i = 0; i < count; ++i) {
      std::vector<int32_t> p(3 + (i * 37) % 150);
      for (auto& t : p) t = static_cast<int32_t>(rng() % 512);
      ps.push_back(p);
    }
    return ps;
  }

  std::unique_ptr<ModelWeights> weights_;
  std::unique_ptr<Backend> backend_;
  std::unique_ptr<MiniMaxM2> model_;
};

TEST_F(EngineTest, GreedyMatchesReferenceIds) {
  auto j = read_json_file(data("reference/m2-tiny-bf16/prompt.json"));
  ASSERT_TRUE(j.ok());
  auto e = engine(512);
  const auto want = (*j)["greedy_ids"].get<std::vector<int32_t>>();
  ASSERT_TRUE(e->add_request("r", (*j)["greedy_prompt_ids"].get<std::vector<int32_t>>(),
                             greedy(static_cast<int>(want.size()))).ok());
  EXPECT_EQ(run_all(*e)["r/0"], want);
}

TEST_F(EngineTest, GreedyIsIdenticalAloneInABatchOf16AndAtChunkSizes1_7_64) {
  const auto ps = prompts(16, 1);
  std::map<std::string, std::vector<int32_t>> alone;
  for (size_t i = 0; i < ps.size(); ++i) {
    auto e = engine(512);
    ASSERT_TRUE(e->add_request(fmt::format("r{}", i), ps[i], greedy(12)).ok());
    auto out = run_all(*e);
    alone.insert(out.begin(), out.end());
  }
  for (int64_t chunk : {512, 1, 7, 64}) {
    auto e = engine(chunk);
    for (size_t i = 0; i < ps.size(); ++i) ASSERT_TRUE(e->add_request(fmt::format("r{}", i), ps[i], greedy(12)).ok());
    EXPECT_EQ(run_all(*e), alone) << "token budget " << chunk;
  }
}

// A tensor-parallel model (ranks as threads, model/tensor_parallel.h) behind
// the engine unchanged: batched, chunked steps sampled on rank 0 give the
// unsharded model's greedy tokens (tests/model/tensor_parallel_test.cpp
// holds its logits to the unsharded ones); weight updates are refused.
TEST_F(EngineTest, ATensorParallelModelServesTheSameGreedyTokens) {
  const auto ps = prompts(8, 5);
  std::map<std::string, std::vector<int32_t>> want;
  {
    auto e = engine(64);
    for (size_t i = 0; i < ps.size(); ++i) ASSERT_TRUE(e->add_request(fmt::format("r{}", i), ps[i], greedy(10)).ok());
    want = run_all(*e);
  }
  for (auto [tp, ep] : {std::pair{2, false}, std::pair{4, true}}) {
    ParallelConfig p;
    p.tensor_parallel_size = tp, p.expert_parallel = ep;
    auto group = MiniMaxM2::tensor_parallel(*weights_, p, [](int) -> Result<std::unique_ptr<Backend>> {
      return make_cpu_backend(1);
    });
    ASSERT_TRUE(group.ok()) << group.status().message();
    model_ = std::move(group.value());
    auto e = engine(64);
    for (size_t i = 0; i < ps.size(); ++i) ASSERT_TRUE(e->add_request(fmt::format("r{}", i), ps[i], greedy(10)).ok());
    EXPECT_EQ(run_all(*e), want) << "tp " << tp;
    EXPECT_EQ(e->stats().kv_blocks_used, 0);
    const Status s = e->swap_weights(*weights_);
    EXPECT_FALSE(s.ok());
    EXPECT_NE(s.message().find("not implemented"), std::string::npos) << s.message();
  }
}

TEST_F(EngineTest, PreemptionAndResumptionGiveTheSameTokens) {
  const auto ps = prompts(6, 2);
  SamplingParams sampled;
  sampled.temperature = 0.9f;
  sampled.max_tokens = 24;
  sampled.ignore_eos = true;
  sampled.seed = 1234;
  std::map<std::string, std::vector<int32_t>> roomy_out;
  {
    auto e = engine(64);
    for (size_t i = 0; i < ps.size(); ++i) {
      ASSERT_TRUE(e->add_request(fmt::format("g{}", i), ps[i], greedy(24)).ok());
      ASSERT_TRUE(e->add_request(fmt::format("s{}", i), ps[i], sampled).ok());
    }
    roomy_out = run_all(*e);
    EXPECT_EQ(e->stats().preemptions, 0);
  }
  // 12 sequences of up to ~210 tokens in a pool of 48 blocks x 8 = 384 tokens.
  auto e = engine(64, 48, 8);
  for (size_t i = 0; i < ps.size(); ++i) {
    ASSERT_TRUE(e->add_request(fmt::format("g{}", i), ps[i], greedy(24)).ok());
    ASSERT_TRUE(e->add_request(fmt::format("s{}", i), ps[i], sampled).ok());
  }
  EXPECT_EQ(run_all(*e), roomy_out);
  EXPECT_GT(e->stats().preemptions, 0);
  EXPECT_EQ(e->stats().kv_blocks_used, 0);
}

TEST_F(EngineTest, ARecomputationIsPrefillAndTheDecodesAfterItAreDecodes) {
  // 4 blocks of 4 tokens, no prefix cache, two 7-token prompts of 5 tokens
  // each. B is preempted when A's position 8 needs a third block, waits
  // while A finishes, then recomputes its 9 known tokens and decodes 2 more.
  EngineConfig c;
  c.block_size = 4;
  c.num_blocks = 4;
  c.kv_dtype = DType::kF32;
  c.prefix_cache = false;
  auto e = Engine::create(*model_, nullptr, c);
  ASSERT_TRUE(e.ok()) << e.status().message();
  ASSERT_TRUE((*e)->add_request("a", {11, 12, 13, 14, 15, 16, 17}, greedy(5)).ok());
  ASSERT_TRUE((*e)->add_request("b", {21, 22, 23, 24, 25, 26, 27}, greedy(5)).ok());
  const auto out = run_all(**e);
  EXPECT_EQ(out.at("a/0").size(), 5u);
  EXPECT_EQ(out.at("b/0").size(), 5u);
  const EngineStats st = (*e)->stats();
  EXPECT_EQ(st.preemptions, 1);
  EXPECT_EQ(st.prefill_tokens, 7 + 7 + 9);
  EXPECT_EQ(st.decode_tokens, 4 + 1 + 2);  // A's 4; B's 1 before and 2 after its preemption
}

TEST_F(EngineTest, SecondAgenticTurnPrefillsOnlyItsNewTokens) {
  const int bs = 16;
  auto e = engine(512, 256, bs);
  std::vector<int32_t> turn1 = prompts(1, 3)[0];
  turn1.resize(100, 7);
  ASSERT_TRUE(e->add_request("t1", turn1, greedy(10)).ok());
  const auto out1 = run_all(*e)["t1/0"];
  const int64_t before = e->stats().prefill_tokens;
  EXPECT_EQ(before, 100);
  // Turn 2 resends the history (prompt + answer) plus a tool result.
  std::vector<int32_t> turn2 = turn1;
  turn2.insert(turn2.end(), out1.begin(), out1.end());
  for (int i = 0; i < 20; ++i) turn2.push_back(300 + i);
  ASSERT_TRUE(e->add_request("t2", turn2, greedy(5)).ok());
  run_all(*e);
  // Turn 1 computed 100 + 9 tokens (the last sampled one never enters the
  // cache): 6 full blocks are cached and reused.
  const int64_t cached = (100 + 10 - 1) / bs * bs;
  EXPECT_EQ(e->stats().prefill_tokens - before, static_cast<int64_t>(turn2.size()) - cached);
  EXPECT_EQ(e->stats().prefix.hit_tokens, cached);
}

TEST_F(EngineTest, NCompletionsShareThePromptBlocks) {
  const int bs = 16;
  auto e = engine(512, 256, bs);
  std::vector<int32_t> p = prompts(1, 4)[0];
  p.resize(70, 5);
  SamplingParams s;
  s.n = 3;
  s.temperature = 1.0f;
  s.max_tokens = 8;
  s.ignore_eos = true;
  s.seed = 7;
  ASSERT_TRUE(e->add_request("r", p, s).ok());
  auto out = run_all(*e);
  ASSERT_EQ(out.size(), 3u);
  // The prompt ran once in full; siblings recomputed only its partial last block.
  const int64_t tail = 70 - (70 - 1) / bs * bs;
  EXPECT_EQ(e->stats().prefill_tokens, 70 + 2 * tail);
  EXPECT_NE(out["r/0"], out["r/1"]);
  // Reproducible with the same seed.
  auto e2 = engine(512, 256, bs);
  ASSERT_TRUE(e2->add_request("r", p, s).ok());
  EXPECT_EQ(run_all(*e2), out);
}

TEST_F(EngineTest, AbortFreesBlocksAtOnce) {
  auto e = engine(32);
  ASSERT_TRUE(e->add_request("long", prompts(1, 5)[0], greedy(200)).ok());
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(e->step().ok());
  EXPECT_GT(e->stats().kv_blocks_used, 0);
  e->abort("long");
  EXPECT_EQ(e->stats().kv_blocks_used, 0);
  EXPECT_FALSE(e->has_unfinished());
}

TEST_F(EngineTest, LengthStopTokenAndBadRequests) {
  auto e = engine(512);
  SamplingParams p = greedy(5);
  ASSERT_TRUE(e->add_request("a", {1, 2, 3}, p).ok());
  std::vector<RequestOutput> outs;
  while (e->has_unfinished()) {
    auto s = e->step();
    ASSERT_TRUE(s.ok());
    outs.insert(outs.end(), s->begin(), s->end());
  }
  ASSERT_FALSE(outs.empty());
  EXPECT_TRUE(outs.back().finished);
  EXPECT_EQ(outs.back().finish_reason, FinishReason::kLength);
  EXPECT_EQ(outs.back().num_output_tokens, 5);
  const int32_t first = outs.front().new_token_ids[0];

  // The same request stops at its first token when that token is a stop id.
  SamplingParams q = greedy(5);
  q.stop_token_ids = {first};
  ASSERT_TRUE(e->add_request("b", {1, 2, 3}, q).ok());
  auto out = run_all(*e);
  EXPECT_EQ(out["b/0"], std::vector<int32_t>{first});
  // min_tokens masks it instead.
  q.min_tokens = 2;
  ASSERT_TRUE(e->add_request("c", {1, 2, 3}, q).ok());
  out = run_all(*e);
  ASSERT_GE(out["c/0"].size(), 2u);
  EXPECT_NE(out["c/0"][0], first);

  EXPECT_FALSE(e->add_request("d", {}, p).ok());
  EXPECT_FALSE(e->add_request("d", {999999}, p).ok());
  EXPECT_NE(e->add_request("d", std::vector<int32_t>(5000, 1), p).message().find("context holds"), std::string::npos);
  SamplingParams bad = p;
  bad.stop = {"x"};
  EXPECT_NE(e->add_request("d", {1}, bad).message().find("need a tokenizer"), std::string::npos);
  ASSERT_TRUE(e->add_request("dup", {1}, p).ok());
  EXPECT_FALSE(e->add_request("dup", {1}, p).ok());
}

}  // namespace
}  // namespace m2

namespace m2 {
namespace {

TEST_F(EngineTest, PromptLogprobsAreTheModelsLogSoftmax) {
  const std::vector<int32_t> prompt = prompts(1, 9)[0];
  auto full = all_logits(*model_, prompt, DType::kF32);
  ASSERT_TRUE(full.ok());
  auto e = engine(16);  // several prefill chunks
  SamplingParams p = greedy(2);
  p.prompt_logprobs = 3;
  ASSERT_TRUE(e->add_request("r", prompt, p).ok());
  std::vector<std::vector<TokenLogprob>> got;
  while (e->has_unfinished()) {
    auto outs = e->step();
    ASSERT_TRUE(outs.ok());
    for (const auto& o : *outs)
      if (!o.prompt_logprobs.empty()) got = o.prompt_logprobs;
  }
  const int64_t V = model_->config().vocab_size;
  ASSERT_EQ(got.size(), prompt.size());
  EXPECT_TRUE(got[0].empty());  // nothing predicts the first token
  for (size_t i = 1; i < prompt.size(); ++i) {
    std::span<const float> lg(full->data() + (i - 1) * V, V);
    float z = 0;
    const float want = token_logprob(lg, prompt[i], &z);
    ASSERT_EQ(got[i].size(), 4u);
    EXPECT_EQ(got[i][0].id, prompt[i]);
    EXPECT_NEAR(got[i][0].logprob, want, 1e-5);
    const auto top = top_logprobs(lg, 3, z);
    for (int k = 0; k < 3; ++k) EXPECT_EQ(got[i][1 + k].id, top[k].id);
  }
}

TEST(SamplingDefaults, ModelCardThenGenerationConfig) {
  const SamplingParams card = default_sampling_params("");
  EXPECT_FLOAT_EQ(card.temperature, 1.0f);
  EXPECT_FLOAT_EQ(card.top_p, 0.95f);
  EXPECT_EQ(card.top_k, 40);
  const std::string dir = ::testing::TempDir() + "m2cpp_genconfig";
  std::filesystem::create_directories(dir);
  std::ofstream(dir + "/generation_config.json") << R"({"temperature": 0.6, "top_k": 20, "top_p": 0.8})";
  const SamplingParams p = default_sampling_params(dir);
  EXPECT_FLOAT_EQ(p.temperature, 0.6f);
  EXPECT_EQ(p.top_k, 20);
  EXPECT_FLOAT_EQ(p.top_p, 0.8f);
}

}  // namespace
}  // namespace m2

namespace m2 {
namespace {

TEST_F(EngineTest, ReasoningBudgetForcesTheEndTokenAtTheBudget) {
  constexpr int32_t kEnd = 7;  // stands for `</think>`
  const std::vector<int32_t> prompt = prompts(1, 11)[0];
  auto e = engine(512);
  SamplingParams plain = greedy(12);
  ASSERT_TRUE(e->add_request("plain", prompt, plain).ok());
  SamplingParams budget = plain;
  budget.reasoning_budget = 5;
  budget.reasoning_end_token = kEnd;
  ASSERT_TRUE(e->add_request("budget", prompt, budget).ok());
  SamplingParams zero = budget;
  zero.reasoning_budget = 0;
  ASSERT_TRUE(e->add_request("zero", prompt, zero).ok());
  // The end token already written (here forced first): no budget applies after it.
  SamplingParams closed = budget;
  closed.forced_tokens = {kEnd};
  ASSERT_TRUE(e->add_request("closed", prompt, closed).ok());
  auto out = run_all(*e);
  const auto& p = out["plain/0"];
  const auto& b = out["budget/0"];
  ASSERT_EQ(b.size(), 12u);
  EXPECT_EQ(std::vector<int32_t>(b.begin(), b.begin() + 5), std::vector<int32_t>(p.begin(), p.begin() + 5));
  EXPECT_EQ(b[5], kEnd) << "the budget's end token right after 5 tokens";
  EXPECT_EQ(out["zero/0"][0], kEnd);
  const auto& c = out["closed/0"];
  ASSERT_EQ(c.size(), 12u);
  EXPECT_EQ(c[0], kEnd);
  // Nothing is forced later: the same tokens as a run without a budget.
  auto e2 = engine(512);
  SamplingParams unbudgeted = plain;
  unbudgeted.forced_tokens = {kEnd};
  ASSERT_TRUE(e2->add_request("closed", prompt, unbudgeted).ok());
  EXPECT_EQ(run_all(*e2)["closed/0"], c);
  SamplingParams bad = budget;
  bad.reasoning_end_token = -1;
  EXPECT_FALSE(e->add_request("bad", prompt, bad).ok());
}

// Ends its sequence at the `after`-th piece of text it is fed.
class CountingStop final : public TextStop {
 public:
  CountingStop(int after, std::string* text) : after_(after), text_(text) {}
  bool feed(std::string_view piece) override {
    text_->append(piece);
    return ++fed_ == after_;
  }

 private:
  int after_, fed_ = 0;
  std::string* text_;
};

TEST(EngineTextStop, EndsTheSequenceKeepingItsText) {
  const std::string dir = data("m2-tiny-chat");
  auto w = load_model(dir, LoadOptions{});
  ASSERT_TRUE(w.ok()) << w.status().message();
  auto backend = make_cpu_backend();
  MiniMaxM2 model(**w, *backend);
  auto tok = text::Tokenizer::load_from_dir(dir);
  ASSERT_TRUE(tok.ok()) << tok.status().message();
  EngineConfig c;
  c.num_blocks = 64;
  c.kv_dtype = DType::kF32;
  auto e = Engine::create(model, tok->get(), c);
  ASSERT_TRUE(e.ok()) << e.status().message();
  SamplingParams p;
  p.temperature = 0.0f;
  p.max_tokens = 20;
  p.ignore_eos = true;
  p.n = 2;
  std::vector<std::string> seen(2);
  int made = 0;
  p.text_stop = std::make_shared<const TextStopFactory>(
      [&] { return std::make_unique<CountingStop>(4, &seen[made++]); });
  ASSERT_TRUE((*e)->add_request("r", {1, 2, 3, 4}, p).ok());
  std::vector<std::string> text(2);
  std::vector<RequestOutput> last(2);
  for (int guard = 0; (*e)->has_unfinished() && guard < 1000; ++guard) {
    auto step = (*e)->step();
    ASSERT_TRUE(step.ok()) << step.status().message();
    for (RequestOutput& o : *step) {
      text[o.index] += o.new_text;
      if (o.finished) last[o.index] = o;
    }
  }
  EXPECT_EQ(made, 2) << "one stop condition per completion";
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(last[i].finish_reason, FinishReason::kStop);
    EXPECT_EQ(last[i].num_output_tokens, 4);
    EXPECT_TRUE(last[i].stop_string.empty());
    EXPECT_EQ(text[i], seen[i]) << "the text that ended it is kept";
  }
}

}  // namespace
}  // namespace m2
