// Constrained decoding through the engine on the CPU backend with the tiny
// chat model (random weights, so the grammar alone keeps the output in its
// language): sampled outputs fullmatch the regex (std::regex as the
// reference), the grammar starts after its trigger token, forced tokens go
// through it, and an unconstrained sequence in the same batch is unchanged.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <regex>

#include "engine/engine.h"
#include "model/greedy.h"
#include "text/tokenizer/tokenizer.h"

namespace m2 {
namespace {

constexpr const char* kPattern = "(ab|cd){1,3}x?";

class EngineConstraintTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string dir = std::string(M2CPP_SOURCE_DIR) + "/tests/data/m2-tiny-chat";
    auto w = load_model(dir, LoadOptions{});
    ASSERT_TRUE(w.ok()) << w.status().message();
    weights_ = std::move(*w);
    backend_ = make_cpu_backend();
    model_ = std::make_unique<MiniMaxM2>(*weights_, *backend_);
    auto tok = text::Tokenizer::load_from_dir(dir);
    ASSERT_TRUE(tok.ok()) << tok.status().message();
    tokenizer_ = std::move(*tok);
    eos_ = *tokenizer_->token_to_id("[e~[");
    auto c = ConstraintCompiler::create(*tokenizer_, model_->config().vocab_size, {eos_});
    ASSERT_TRUE(c.ok()) << c.status().message();
    auto g = (*c)->compile({ConstraintSource::Kind::kRegex, kPattern});
    ASSERT_TRUE(g.ok()) << g.status().message();
    constraint_ = *g;
    compiler_ = std::move(*c);
    EngineConfig ec;
    ec.num_blocks = 128;
    ec.kv_dtype = DType::kF32;
    ec.eos_ids = {eos_};
    auto e = Engine::create(*model_, tokenizer_.get(), ec);
    ASSERT_TRUE(e.ok()) << e.status().message();
    engine_ = std::move(*e);
  }

  // Every request's output tokens and finish reason.
  std::map<std::string, std::pair<std::vector<int32_t>, FinishReason>> run_all() {
    std::map<std::string, std::pair<std::vector<int32_t>, FinishReason>> out;
    for (int guard = 0; engine_->has_unfinished() && guard < 10000; ++guard) {
      auto step = engine_->step();
      EXPECT_TRUE(step.ok()) << step.status().message();
      if (!step.ok()) break;
      for (const auto& o : *step) {
        auto& [ids, reason] = out[fmt::format("{}/{}", o.request_id, o.index)];
        ids.insert(ids.end(), o.new_token_ids.begin(), o.new_token_ids.end());
        if (o.finished) reason = o.finish_reason;
      }
    }
    return out;
  }

  std::string text_before_eos(std::vector<int32_t> ids) {
    if (!ids.empty() && ids.back() == eos_) ids.pop_back();
    auto t = tokenizer_->decode(ids);
    EXPECT_TRUE(t.ok());
    return t.ok() ? *t : std::string();
  }

  std::unique_ptr<ModelWeights> weights_;
  std::unique_ptr<Backend> backend_;
  std::unique_ptr<MiniMaxM2> model_;
  std::unique_ptr<text::Tokenizer> tokenizer_;
  std::unique_ptr<ConstraintCompiler> compiler_;
  std::shared_ptr<const Constraint> constraint_;
  std::unique_ptr<Engine> engine_;
  int32_t eos_ = -1;
};

TEST_F(EngineConstraintTest, SampledOutputsFullmatchAndEndAtEos) {
  SamplingParams p;
  p.temperature = 1.0f;
  p.top_k = 0;
  p.top_p = 1.0f;
  p.max_tokens = 40;
  p.n = 4;
  p.constraint = constraint_;
  for (int r = 0; r < 4; ++r) {
    p.seed = 100 + r;
    ASSERT_TRUE(engine_->add_request(fmt::format("r{}", r), {1, 2, 3, 4 + r}, p).ok());
  }
  const auto out = run_all();
  ASSERT_EQ(out.size(), 16u);
  for (const auto& [key, result] : out) {
    EXPECT_EQ(result.second, FinishReason::kStop) << key;
    EXPECT_EQ(result.first.back(), eos_) << key;
    const std::string text = text_before_eos(result.first);
    EXPECT_TRUE(std::regex_match(text, std::regex(kPattern))) << key << ": '" << text << "'";
  }
}

TEST_F(EngineConstraintTest, StartsAfterTheTriggerTokenAndFeedsForcedTokens) {
  const int32_t trigger = *tokenizer_->token_to_id("</think>");
  auto ab = tokenizer_->encode("ab");
  ASSERT_TRUE(ab.ok());
  SamplingParams p;
  p.temperature = 1.0f;
  p.seed = 7;
  p.max_tokens = 40;
  p.constraint = constraint_;
  p.constraint_after_token = trigger;
  // Free tokens before the trigger (a "reasoning"), then "ab" forced inside the grammar.
  auto before = tokenizer_->encode("zz!");
  ASSERT_TRUE(before.ok());
  p.forced_tokens = *before;
  p.forced_tokens.push_back(trigger);
  p.forced_tokens.insert(p.forced_tokens.end(), ab->begin(), ab->end());
  ASSERT_TRUE(engine_->add_request("t", {1, 2, 3}, p).ok());
  const auto out = run_all();
  const std::vector<int32_t>& ids = out.at("t/0").first;
  const size_t start = before->size() + 1;
  ASSERT_GT(ids.size(), start);
  EXPECT_EQ(ids[start - 1], trigger);
  const std::string answer = text_before_eos({ids.begin() + static_cast<std::ptrdiff_t>(start), ids.end()});
  EXPECT_EQ(answer.substr(0, 2), "ab");
  EXPECT_TRUE(std::regex_match(answer, std::regex(kPattern))) << answer;
}

TEST_F(EngineConstraintTest, AnUnconstrainedNeighbourIsUnchanged) {
  SamplingParams free;
  free.temperature = 1.0f;
  free.seed = 3;
  free.max_tokens = 12;
  free.ignore_eos = true;
  ASSERT_TRUE(engine_->add_request("alone", {5, 6, 7}, free).ok());
  const auto alone = run_all().at("alone/0").first;
  SamplingParams constrained = free;
  constrained.ignore_eos = false;
  constrained.constraint = constraint_;
  ASSERT_TRUE(engine_->add_request("free", {5, 6, 7}, free).ok());
  ASSERT_TRUE(engine_->add_request("held", {8, 9}, constrained).ok());
  const auto both = run_all();
  EXPECT_EQ(both.at("free/0").first, alone);
  EXPECT_TRUE(std::regex_match(text_before_eos(both.at("held/0").first), std::regex(kPattern)));
}

TEST_F(EngineConstraintTest, MinTokensYieldToTheGrammarsEndAndIgnoreEosIsRefused) {
  SamplingParams p;
  p.temperature = 1.0f;
  p.seed = 11;
  p.max_tokens = 30;
  p.min_tokens = 25;  // longer than any word of the language: EOS is banned when the grammar needs it
  p.constraint = constraint_;
  ASSERT_TRUE(engine_->add_request("m", {1, 2}, p).ok());
  const auto out = run_all().at("m/0");
  EXPECT_EQ(out.second, FinishReason::kStop);
  EXPECT_EQ(out.first.back(), eos_);
  EXPECT_TRUE(std::regex_match(text_before_eos(out.first), std::regex(kPattern)));
  SamplingParams bad = p;
  bad.ignore_eos = true;
  EXPECT_FALSE(engine_->add_request("bad", {1, 2}, bad).ok());
}

}  // namespace
}  // namespace m2
