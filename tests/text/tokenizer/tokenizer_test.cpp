// The public Tokenizer on the committed m2-mini tokenizer (MiniMax-M2
// layout). Expected ids are HF tokenizers' for the same file; the large
// differential test is tests/text/test_tokenizer_diff.py.
#include "text/tokenizer/tokenizer.h"

#include <gtest/gtest.h>

#include <random>
#include <thread>

#include "util/json.h"

namespace m2::text {
namespace {

const std::string kMini = std::string(M2CPP_SOURCE_DIR) + "/tests/data/tokenizer/m2-mini";

const Tokenizer& mini() {
  static const auto tok = [] {
    auto t = Tokenizer::load_from_dir(kMini);
    EXPECT_TRUE(t.ok()) << t.status().message();
    return std::move(t).value();
  }();
  return *tok;
}

std::vector<int32_t> encode(const std::string& text, bool add_special = false) {
  auto ids = mini().encode(text, add_special);
  EXPECT_TRUE(ids.ok()) << ids.status().message();
  return ids.ok() ? ids.value() : std::vector<int32_t>{};
}

std::string decode(const std::vector<int32_t>& ids, bool skip) {
  auto text = mini().decode(ids, skip);
  EXPECT_TRUE(text.ok()) << text.status().message();
  return text.ok() ? text.value() : std::string();
}

TEST(Tokenizer, EncodesLikeHf) {
  EXPECT_EQ(encode("Hello world"), (std::vector<int32_t>{39, 596, 78, 2375}));
  EXPECT_EQ(encode("]~!b[]~b]system\nYou are helpful.[e~[\n"),
            (std::vector<int32_t>{3874, 3859, 82, 839, 198, 3575, 553, 1652, 1500, 13, 3860, 198}));
  EXPECT_EQ(encode("<think>\nok</think>\n\n<minimax:tool_call>"),
            (std::vector<int32_t>{3890, 198, 525, 3891, 279, 3892}));
  EXPECT_EQ(encode("h\xC3\xA9llo \xF0\x9F\x98\x80 \xE4\xBD\xA0\xE5\xA5\xBD"),
            (std::vector<int32_t>{71, 377, 680, 78, 220, 172, 253, 246, 222, 220, 2100, 254, 2077, 121}));
  EXPECT_EQ(encode("I'LL see you're 12345"),
            (std::vector<int32_t>{40, 6, 43, 43, 1921, 481, 6, 264, 220, 899, 18, 2548}));
  EXPECT_EQ(encode(""), (std::vector<int32_t>{}));
  // No post-processor: add_special_tokens adds nothing (the template writes BOS).
  EXPECT_EQ(encode("Hello world", true), encode("Hello world"));
}

TEST(Tokenizer, DecodesLikeHf) {
  const std::vector<int32_t> ids = {3874, 3859, 82, 839, 198, 3575, 553, 1652, 1500, 13, 3860, 198};
  EXPECT_EQ(decode(ids, false), "]~!b[]~b]system\nYou are helpful.[e~[\n");
  EXPECT_EQ(decode(ids, true), "system\nYou are helpful.\n");
  // <think> and the tool-call tags are added but not special: kept.
  EXPECT_EQ(decode({3890, 198, 525, 3891}, true), "<think>\nok</think>");
  EXPECT_EQ(decode({172, 253}, false), "\xEF\xBF\xBD");  // a cut 4-byte sequence
  EXPECT_EQ(decode({253, 65}, false),
            "\xEF\xBF\xBD"
            "b");                                           // a stray continuation byte
  EXPECT_EQ(decode({39, 999999, -5, 596}, false), "Hell");  // unknown ids are dropped
}

TEST(Tokenizer, VocabularyAndRoles) {
  const Tokenizer& t = mini();
  EXPECT_EQ(t.vocab_size(), 3894);
  EXPECT_EQ(t.token_to_id("<think>"), std::optional<int32_t>(3890));
  EXPECT_EQ(t.id_to_token(3890), std::optional<std::string_view>("<think>"));
  EXPECT_EQ(t.id_to_token(39), std::optional<std::string_view>("H"));
  EXPECT_EQ(t.id_to_token(5000), std::nullopt);
  EXPECT_TRUE(t.is_special(3860));
  EXPECT_FALSE(t.is_special(3890));
  EXPECT_FALSE(t.is_special(39));
  ASSERT_TRUE(t.roles().eos.has_value());
  EXPECT_EQ(t.roles().eos->content, "[e~[");
  EXPECT_EQ(t.eos_id(), std::optional<int32_t>(3860));
  EXPECT_EQ(t.bos_id(), std::optional<int32_t>(3874));
  EXPECT_TRUE(t.decodes_byte_level());
}

TEST(Tokenizer, RejectsInvalidUtf8WithTheOffset) {
  auto ids = mini().encode("ok\xC3(");
  ASSERT_FALSE(ids.ok());
  EXPECT_NE(ids.status().message().find("byte 2"), std::string::npos) << ids.status().message();
}

Status load_error(const std::string& json) {
  auto t = Tokenizer::from_json_text(json, "bad.json");
  return t.ok() ? Status() : t.status();
}

TEST(Tokenizer, LoadErrorsNameTheProblem) {
  const std::string model = R"("model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2}, "merges": ["a b"]})";
  EXPECT_TRUE(load_error("{" + model + "}").ok());
  const std::pair<std::string, std::string> cases[] = {
      {"{\"model\": ", "bad.json: invalid JSON at byte"},
      {"{}", "bad.json: missing model"},
      {R"({"model": {"type": "Unigram", "vocab": [["a", 0.0]]}})", "model: unsupported model type 'Unigram'"},
      {R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": ["a b c"]}})", "model.merges[0]"},
      {R"({"model": {"type": "BPE", "vocab": {"a": "x"}, "merges": []}})", "model.vocab['a']"},
      {R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": [], "dropout": 0.1}})", "dropout"},
      {"{" + model + R"(, "normalizer": {"type": "Sequence", "normalizers": [{"type": "Precompiled"}]}})",
       "normalizer.normalizers[0]: unsupported normalizer type 'Precompiled'"},
      {"{" + model +
           R"J(, "pre_tokenizer": {"type": "Split", "pattern": {"Regex": "(?~x)"}, "behavior": "Isolated"}})J",
       "pre_tokenizer.pattern.Regex"},
      {"{" + model + R"(, "decoder": {"type": "WordPiece"}})", "decoder: unsupported decoder type 'WordPiece'"},
      {"{" + model + R"(, "post_processor": {"type": "Nope"}})", "post_processor: unsupported post-processor type"},
      {"{" + model + R"(, "added_tokens": [{"content": 3}]})", "added_tokens[0].content"},
  };
  for (const auto& [json, expected] : cases) {
    const Status s = load_error(json);
    ASSERT_FALSE(s.ok()) << json;
    EXPECT_NE(s.message().find(expected), std::string::npos) << s.message();
  }
}

TEST(Tokenizer, ConcurrentEncodingGivesTheSameIds) {
  std::vector<std::string> texts;
  for (int i = 0; i < 300; ++i) {
    texts.push_back("Doc " + std::to_string(i) + ": the quick brown fox \xE4\xBD\xA0\xE5\xA5\xBD <think>" +
                    std::string(static_cast<size_t>(i % 17), 'a') + "\n]~b]user\n" + std::to_string(i * 7919));
  }
  std::vector<std::vector<int32_t>> expected;
  for (const auto& t : texts) expected.push_back(encode(t));
  std::vector<std::thread> threads;
  std::vector<int> mismatches(8, 0);
  for (int k = 0; k < 8; ++k) {
    threads.emplace_back([&, k] {
      for (int round = 0; round < 3; ++round) {
        for (size_t i = 0; i < texts.size(); ++i) {
          auto ids = mini().encode(texts[(i + static_cast<size_t>(k) * 37) % texts.size()]);
          if (!ids.ok() || ids.value() != expected[(i + static_cast<size_t>(k) * 37) % texts.size()]) ++mismatches[k];
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  for (int k = 0; k < 8; ++k) EXPECT_EQ(mismatches[k], 0) << "thread " << k;
}

// Damaged files (a component or field replaced by a value of another type)
// load or fail with a message; they never crash.
TEST(Tokenizer, DamagedFilesFailCleanly) {
  auto original = read_json_file(kMini + "/tokenizer.json");
  ASSERT_TRUE(original.ok());
  const Json replacements[] = {Json(nullptr), Json(7), Json(-1), Json("x"), Json::array(), Json::object(),
                               Json::array({1, "a"}), Json{{"type", "Nope"}}};
  std::mt19937 rng(3);
  int failures = 0;
  for (int trial = 0; trial < 300; ++trial) {
    Json doc = original.value();
    // A random path of up to three levels below the root.
    Json* node = &doc;
    for (int depth = 0; depth < 1 + static_cast<int>(rng() % 3); ++depth) {
      if (node->is_object() && !node->empty()) {
        auto it = node->begin();
        std::advance(it, static_cast<long>(rng() % node->size()));
        if (it.key() == "vocab" || it.key() == "merges") break;  // keep them: too big to serialize per trial
        node = &it.value();
      } else if (node->is_array() && !node->empty()) {
        node = &(*node)[rng() % node->size()];
      }
    }
    *node = replacements[rng() % std::size(replacements)];
    auto t = Tokenizer::from_json_text(doc.dump(), "damaged.json");
    if (t.ok()) {
      EXPECT_TRUE(t.value()->encode("Hello <think> world").ok());
    } else {
      ++failures;
      EXPECT_NE(t.status().message().find("damaged.json"), std::string::npos) << t.status().message();
    }
  }
  EXPECT_GT(failures, 50);
}

}  // namespace
}  // namespace m2::text
