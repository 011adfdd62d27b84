// The constrained-decoding matcher (engine/constraint.h) against independent
// ground truth: tests/data/constraint/cases.json holds grammar sources and
// candidate outputs with the verdict of Python's jsonschema / re.fullmatch
// (tools/make_constraint_cases.py). A candidate must be accepted token by
// token, each token inside the mask computed before it, and end where a
// stop token is allowed, exactly when the reference calls it valid.
#include "engine/constraint.h"

#include <gtest/gtest.h>

#include <fstream>
#include <random>
#include <regex>

#include "model/sampling.h"
#include "text/tokenizer/tokenizer.h"
#include "util/json.h"

namespace m2 {
namespace {

constexpr int kVocab = 4096;  // the tiny models' rows: ids past the tokenizer's 3,894 are padding

bool allowed(const std::vector<uint32_t>& mask, int32_t id) { return (mask[id / 32] >> (id % 32)) & 1u; }

class ConstraintTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto tok = text::Tokenizer::load_from_dir(std::string(M2CPP_SOURCE_DIR) + "/tests/data/tokenizer/m2-mini");
    ASSERT_TRUE(tok.ok()) << tok.status().message();
    tokenizer_ = std::move(*tok);
    const auto eos = tokenizer_->token_to_id("[e~[");
    ASSERT_TRUE(eos.has_value());
    eos_ = *eos;
    auto c = ConstraintCompiler::create(*tokenizer_, kVocab, {eos_});
    ASSERT_TRUE(c.ok()) << c.status().message();
    compiler_ = std::move(*c);
  }

  std::shared_ptr<const Constraint> compile(ConstraintSource::Kind kind, const std::string& text) {
    auto c = compiler_->compile({kind, text});
    EXPECT_TRUE(c.ok()) << c.status().message() << " in " << text;
    return c.ok() ? *c : nullptr;
  }

  // Feeds `text`'s tokens; true if each was in the mask before it and
  // accepted, and a stop token is allowed after the last.
  bool matches(const std::shared_ptr<const Constraint>& c, const std::string& text) {
    auto ids = tokenizer_->encode(text);
    EXPECT_TRUE(ids.ok());
    ConstraintMatcher m(c);
    std::vector<uint32_t> mask(static_cast<size_t>(constraint_mask_words(kVocab)));
    for (int32_t id : *ids) {
      m.fill_mask(mask);
      const bool in_mask = allowed(mask, id);
      const bool accepted = m.accept(id);
      EXPECT_EQ(in_mask, accepted) << "mask and accept disagree on token " << id << " of '" << text << "'";
      if (!accepted) return false;
    }
    m.fill_mask(mask);
    return allowed(mask, eos_);
  }

  std::unique_ptr<text::Tokenizer> tokenizer_;
  std::unique_ptr<ConstraintCompiler> compiler_;
  int32_t eos_ = -1;
};

TEST_F(ConstraintTest, AgreesWithPythonReferences) {
  std::ifstream f(std::string(M2CPP_SOURCE_DIR) + "/tests/data/constraint/cases.json");
  ASSERT_TRUE(f.good());
  const Json cases = Json::parse(f);
  int checked = 0;
  for (const Json& c : cases["cases"]) {
    const std::string kind = c["kind"];
    const auto k = kind == "json_schema" ? ConstraintSource::Kind::kJsonSchema
                   : kind == "regex"     ? ConstraintSource::Kind::kRegex
                                         : ConstraintSource::Kind::kGrammar;
    auto constraint = compile(k, c["source"]);
    ASSERT_TRUE(constraint);
    for (const Json& cand : c["candidates"]) {
      const std::string text = cand["text"];
      EXPECT_EQ(matches(constraint, text), cand["valid"].get<bool>()) << kind << " " << c["source"] << ": '" << text << "'";
      ++checked;
    }
  }
  EXPECT_GE(checked, 50);
}

TEST_F(ConstraintTest, PaddingAndSpecialIdsAreNeverAllowed) {
  auto c = compile(ConstraintSource::Kind::kRegex, "[a-z ]+");
  ConstraintMatcher m(c);
  std::vector<uint32_t> mask(static_cast<size_t>(constraint_mask_words(kVocab)));
  m.fill_mask(mask);
  for (int32_t id = tokenizer_->vocab_size(); id < kVocab; ++id) EXPECT_FALSE(allowed(mask, id)) << id;
  for (int32_t id = 0; id < tokenizer_->vocab_size(); ++id)
    if (tokenizer_->is_special(id)) EXPECT_FALSE(allowed(mask, id)) << id;
  EXPECT_FALSE(allowed(mask, eos_));  // nothing matched yet: "+" needs a character
  const auto a = tokenizer_->token_to_id("a");
  ASSERT_TRUE(a);
  EXPECT_TRUE(allowed(mask, *a));
  EXPECT_TRUE(m.accept(*a));
  m.fill_mask(mask);
  EXPECT_TRUE(allowed(mask, eos_));
  EXPECT_TRUE(m.accept(eos_));
  EXPECT_TRUE(m.terminated());
  m.fill_mask(mask);
  for (uint32_t w : mask) EXPECT_EQ(w, 0u);  // nothing after the stop token
}

TEST_F(ConstraintTest, InvalidSourcesAreErrors) {
  EXPECT_FALSE(compiler_->compile({ConstraintSource::Kind::kJsonSchema, "{\"type\": 5}"}).ok());
  EXPECT_FALSE(compiler_->compile({ConstraintSource::Kind::kJsonSchema, "not json"}).ok());
  EXPECT_FALSE(compiler_->compile({ConstraintSource::Kind::kRegex, "(ab"}).ok());
  EXPECT_FALSE(compiler_->compile({ConstraintSource::Kind::kGrammar, "root ::= missing_rule"}).ok());
  EXPECT_FALSE(compiler_->compile({ConstraintSource::Kind::kStructuralTag, "{\"type\": \"nope\"}"}).ok());
}

// Random walks through the mask always end in a string the reference accepts:
// here the reference is the same regex as a sampled-output check.
TEST_F(ConstraintTest, SampledWalksStayInTheLanguage) {
  auto c = compile(ConstraintSource::Kind::kRegex, "(ab|cd){1,3}x?");
  std::mt19937 rng(7);
  std::vector<uint32_t> mask(static_cast<size_t>(constraint_mask_words(kVocab)));
  for (int walk = 0; walk < 50; ++walk) {
    ConstraintMatcher m(c);
    std::vector<int32_t> out;
    for (int step = 0; step < 32; ++step) {
      m.fill_mask(mask);
      std::vector<int32_t> ok;
      for (int32_t id = 0; id < kVocab; ++id)
        if (allowed(mask, id)) ok.push_back(id);
      ASSERT_FALSE(ok.empty());
      const int32_t id = ok[std::uniform_int_distribution<size_t>(0, ok.size() - 1)(rng)];
      ASSERT_TRUE(m.accept(id));
      if (id == eos_) break;
      out.push_back(id);
    }
    ASSERT_TRUE(m.terminated()) << "the walk did not end within 32 tokens";
    auto text = tokenizer_->decode(out);
    ASSERT_TRUE(text.ok());
    EXPECT_TRUE(std::regex_match(*text, std::regex("(ab|cd){1,3}x?"))) << *text;
  }
}

TEST(SampleRowMask, DrawsOnlyAllowedTokens) {
  const int V = 100;
  std::vector<uint32_t> mask(static_cast<size_t>(constraint_mask_words(V)), 0);
  for (int id : {3, 40, 77}) mask[id / 32] |= 1u << (id % 32);
  std::mt19937 rng(1);
  std::vector<float> base(V);
  for (float& x : base) x = std::normal_distribution<float>(0, 2)(rng);
  base[50] = 30;  // the unconstrained favourite, masked out
  SampleRow row;
  row.allowed = mask;
  row.temperature = 0;
  std::vector<float> lg = base;
  const SampledToken greedy = sample_row(lg, row);
  int best = 3;
  for (int id : {40, 77}) if (base[id] > base[best]) best = id;
  EXPECT_EQ(greedy.id, best);
  row.temperature = 1;
  for (uint64_t seed = 0; seed < 200; ++seed) {
    row.seed = seed;
    lg = base;
    const int32_t id = sample_row(lg, row).id;
    EXPECT_TRUE(id == 3 || id == 40 || id == 77) << id;
  }
  row.logprobs = 0;  // the logprob stays the raw distribution's
  lg = base;
  row.temperature = 0;
  const SampledToken t = sample_row(lg, row);
  std::vector<float> raw = base;
  EXPECT_FLOAT_EQ(t.logprob, token_logprob(raw, t.id, nullptr));
}

}  // namespace
}  // namespace m2
