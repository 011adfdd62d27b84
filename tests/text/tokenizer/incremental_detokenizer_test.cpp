// Streaming detokenization: deltas are always whole UTF-8 characters and
// their concatenation is the full decode, for byte-level and other decoders.
#include "text/tokenizer/incremental_detokenizer.h"

#include <gtest/gtest.h>

#include <random>

#include "text/tokenizer/utf8.h"

namespace m2::text {
namespace {

const Tokenizer& mini() {
  static const auto tok =
      std::move(Tokenizer::load_from_dir(std::string(M2CPP_SOURCE_DIR) + "/tests/data/tokenizer/m2-mini")).value();
  return *tok;
}

// Streams `ids`, checking each delta; returns the deltas (finish() last).
std::vector<std::string> stream(const Tokenizer& tok, const std::vector<int32_t>& ids, bool skip) {
  IncrementalDetokenizer d(tok, skip);
  std::vector<std::string> deltas;
  for (int32_t id : ids) {
    auto delta = d.push(id);
    EXPECT_TRUE(delta.ok()) << delta.status().message();
    deltas.push_back(delta.ok() ? delta.value() : "");
    EXPECT_EQ(tok::find_invalid_utf8(deltas.back()), std::string_view::npos) << "broken UTF-8 after id " << id;
  }
  auto rest = d.finish();
  EXPECT_TRUE(rest.ok());
  deltas.push_back(rest.ok() ? rest.value() : "");
  return deltas;
}

std::string joined(const std::vector<std::string>& parts) {
  std::string out;
  for (const auto& p : parts) out += p;
  return out;
}

TEST(IncrementalDetokenizer, HoldsSplitCharactersUntilComplete) {
  // "é😀你好": the emoji spans 4 ids, each CJK character 2.
  const std::vector<int32_t> ids = {377, 172, 253, 246, 222, 2100, 254, 2077, 121};
  EXPECT_EQ(stream(mini(), ids, false), (std::vector<std::string>{"\xC3\xA9", "", "", "", "\xF0\x9F\x98\x80", "",
                                                                  "\xE4\xBD\xA0", "", "\xE5\xA5\xBD", ""}));
}

TEST(IncrementalDetokenizer, InvalidBytesBecomeReplacementCharactersWhereTheFullDecodePutsThem) {
  // A cut 4-byte sequence at the end: held, then U+FFFD at finish.
  EXPECT_EQ(stream(mini(), {39, 172, 253}, false), (std::vector<std::string>{"H", "", "", "\xEF\xBF\xBD"}));
  // A stray continuation byte cannot start a character: replaced at once.
  EXPECT_EQ(stream(mini(), {253, 65}, false), (std::vector<std::string>{"\xEF\xBF\xBD", "b", ""}));
  // A started sequence broken by ASCII.
  EXPECT_EQ(joined(stream(mini(), {172, 253, 65}, false)), mini().decode(std::vector<int32_t>{172, 253, 65}).value());
}

TEST(IncrementalDetokenizer, SpecialTokensSkippedOrKept) {
  const std::vector<int32_t> ids = {3874, 39, 3860, 3890};
  EXPECT_EQ(joined(stream(mini(), ids, true)), "H<think>");
  EXPECT_EQ(joined(stream(mini(), ids, false)), "]~!b[H[e~[<think>");
}

TEST(IncrementalDetokenizer, RandomStreamsEqualTheFullDecode) {
  std::mt19937 rng(11);
  for (int trial = 0; trial < 400; ++trial) {
    std::vector<int32_t> ids(1 + rng() % 40);
    for (auto& id : ids) id = static_cast<int32_t>(rng() % 3900);
    const bool skip = trial % 2;
    ASSERT_EQ(joined(stream(mini(), ids, skip)), mini().decode(ids, skip).value()) << "trial " << trial;
  }
}

// A sentencepiece-style tokenizer: Metaspace, byte fallback, and the usual
// Replace / ByteFallback / Fuse / Strip decoder chain (not byte-level).
std::unique_ptr<Tokenizer> sentencepiece(const std::string& decoder) {
  std::string vocab = R"("<unk>": 0, "<s>": 1, "</s>": 2)";
  for (int b = 0; b < 256; ++b) vocab += fmt::format(R"(, "<0x{:02X}>": {})", b, 3 + b);
  vocab += R"(, "\u2581": 259, "a": 260, "b": 261, "\u2581a": 262, "ab": 263)";
  const std::string json = R"({"added_tokens": [{"id": 0, "content": "<unk>", "special": true},
      {"id": 1, "content": "<s>", "special": true}, {"id": 2, "content": "</s>", "special": true}],
    "pre_tokenizer": {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "first", "split": false},
    "decoder": )" + decoder +
                           R"(,
    "model": {"type": "BPE", "unk_token": "<unk>", "byte_fallback": true, "vocab": {)" +
                           vocab + R"(}, "merges": ["\u2581 a", "a b"]}})";
  auto t = Tokenizer::from_json_text(json, "sentencepiece.json");
  EXPECT_TRUE(t.ok()) << t.status().message();
  return std::move(t).value();
}

const char kLlamaDecoder[] = R"({"type": "Sequence", "decoders": [
    {"type": "Replace", "pattern": {"String": "\u2581"}, "content": " "}, {"type": "ByteFallback"},
    {"type": "Fuse"}, {"type": "Strip", "content": " ", "start": 1, "stop": 0}]})";

TEST(IncrementalDetokenizer, WindowMethodForOtherDecoders) {
  const auto tok = sentencepiece(kLlamaDecoder);
  EXPECT_FALSE(tok->decodes_byte_level());
  EXPECT_EQ(tok->encode("a b\xC3\xA9").value(), (std::vector<int32_t>{262, 259, 261, 3 + 0xC3, 3 + 0xA9}));
  // Text streams as it comes; the byte-fallback run waits for its end.
  EXPECT_EQ(stream(*tok, {262, 259, 261, 3 + 0xC3, 3 + 0xA9, 260}, false),
            (std::vector<std::string>{"a", " ", "b", "", "",
                                      "\xC3\xA9"
                                      "a",
                                      ""}));
  std::mt19937 rng(5);
  for (int trial = 0; trial < 400; ++trial) {
    std::vector<int32_t> ids(1 + rng() % 30);
    for (auto& id : ids) id = static_cast<int32_t>(rng() % 270);
    const bool skip = trial % 2;
    ASSERT_EQ(joined(stream(*tok, ids, skip)), tok->decode(ids, skip).value()) << "trial " << trial;
  }
}

TEST(IncrementalDetokenizer, ChainsTheWindowCannotReproduceWaitForTheEnd) {
  // A Replace on the joined text could match across ids: emitted at finish only.
  const auto tok = sentencepiece(R"({"type": "Sequence", "decoders": [{"type": "ByteFallback"}, {"type": "Fuse"},
      {"type": "Replace", "pattern": {"Regex": "ab+"}, "content": "X"}]})");
  const std::vector<int32_t> ids = {260, 261, 261, 260};
  const auto deltas = stream(*tok, ids, false);
  EXPECT_EQ(deltas, (std::vector<std::string>{"", "", "", "", "Xa"}));
  EXPECT_EQ(joined(deltas), tok->decode(ids).value());
}

}  // namespace
}  // namespace m2::text
