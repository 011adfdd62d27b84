// The BPE model on small vocabularies; expected ids are those of HF
// tokenizers' own unit tests (models/bpe/model.rs) where one exists.
#include "text/tokenizer/bpe_model.h"

#include <gtest/gtest.h>

#include <random>

namespace m2::text::tok {
namespace {

using Vocab = std::vector<std::pair<std::string, int32_t>>;
using Merges = std::vector<std::pair<std::string, std::string>>;

std::unique_ptr<BpeModel> make(Vocab vocab, Merges merges, BpeOptions options = {}) {
  auto m = BpeModel::create(std::move(vocab), std::move(merges), std::move(options));
  EXPECT_TRUE(m.ok()) << m.status().message();
  return std::move(m).value();
}

std::vector<int32_t> ids(const BpeModel& m, std::string_view word) {
  std::vector<int32_t> out;
  const Status s = m.tokenize(word, out);
  EXPECT_TRUE(s.ok()) << s.message();
  return out;
}

TEST(BpeModel, MergesByRank) {
  // HF test_tokenize_with_and_without_dropout: "unrelated" -> one token.
  Vocab v = {{"u", 0},     {"n", 1},    {"r", 2},        {"e", 3},         {"l", 4},   {"a", 5},
             {"t", 6},     {"d", 7},    {"re", 8},       {"at", 9},        {"ed", 10}, {"un", 11},
             {"ated", 12}, {"rel", 13}, {"related", 14}, {"unrelated", 15}};
  Merges m = {{"r", "e"},   {"a", "t"},  {"e", "d"},      {"u", "n"},
              {"at", "ed"}, {"re", "l"}, {"rel", "ated"}, {"un", "related"}};
  auto bpe = make(v, m);
  EXPECT_EQ(ids(*bpe, "unrelated"), (std::vector<int32_t>{15}));
  EXPECT_EQ(ids(*bpe, "related"), (std::vector<int32_t>{14}));
  EXPECT_EQ(ids(*bpe, "tune"), (std::vector<int32_t>{6, 11, 3}));
  EXPECT_EQ(ids(*bpe, ""), (std::vector<int32_t>{}));
}

TEST(BpeModel, UnknownCharacters) {
  Vocab v = {{"<unk>", 0}, {"a", 1}, {"b", 2}};
  BpeOptions o;
  o.unk_token = "<unk>";
  auto plain = make(v, {}, o);  // HF test_unk_not_fused
  EXPECT_EQ(ids(*plain, "c"), (std::vector<int32_t>{0}));
  EXPECT_EQ(ids(*plain, "cc"), (std::vector<int32_t>{0, 0}));
  EXPECT_EQ(ids(*plain, "accb"), (std::vector<int32_t>{1, 0, 0, 2}));
  o.fuse_unk = true;  // HF test_unk_get_fused
  auto fused = make(v, {}, o);
  EXPECT_EQ(ids(*fused, "cc"), (std::vector<int32_t>{0}));
  EXPECT_EQ(ids(*fused, "accb"), (std::vector<int32_t>{1, 0, 2}));
  // Without unk_token an unknown character is dropped, as HF drops it.
  auto none = make(v, {});
  EXPECT_EQ(ids(*none, "acb"), (std::vector<int32_t>{1, 2}));
  // A unk_token missing from the vocabulary is an error, not a crash.
  BpeOptions missing;
  missing.unk_token = "<nope>";
  auto bad = make(v, {}, missing);
  std::vector<int32_t> out;
  EXPECT_FALSE(bad->tokenize("c", out).ok());
}

TEST(BpeModel, ByteFallback) {
  // HF test_bpe_byte_fallback / _newline.
  BpeOptions o;
  o.unk_token = "<unk>";
  o.byte_fallback = true;
  auto bpe = make({{"<unk>", 0}, {"<0x61>", 1}, {"<0x0A>", 2}}, {}, o);
  EXPECT_EQ(ids(*bpe, "c"), (std::vector<int32_t>{0}));
  EXPECT_EQ(ids(*bpe, "a"), (std::vector<int32_t>{1}));
  EXPECT_EQ(ids(*bpe, "\n"), (std::vector<int32_t>{2}));
  // A character whose bytes all have tokens becomes those bytes.
  Vocab v = {{"<unk>", 0}};
  for (int b = 0; b < 256; ++b) v.emplace_back(fmt::format("<0x{:02X}>", b), b + 1);
  auto full = make(v, {}, o);
  EXPECT_EQ(ids(*full, "\xC3\xA9"), (std::vector<int32_t>{0xC3 + 1, 0xA9 + 1}));
}

TEST(BpeModel, ContinuingSubwordPrefixAndSuffix) {
  // HF test_bpe_with_continuing_subword_prefix.
  BpeOptions o;
  o.unk_token = "[UNK]";
  o.continuing_subword_prefix = "##";
  auto bpe =
      make({{"a", 0}, {"##b", 1}, {"##c", 2}, {"ab", 3}, {"abc", 4}, {"[UNK]", 5}}, {{"a", "##b"}, {"ab", "##c"}}, o);
  EXPECT_EQ(ids(*bpe, "ab"), (std::vector<int32_t>{3}));
  EXPECT_EQ(ids(*bpe, "abc"), (std::vector<int32_t>{4}));
  EXPECT_EQ(ids(*bpe, "ba"), (std::vector<int32_t>{5, 5}));  // "b" first and "##a" are unknown
  BpeOptions s;
  s.end_of_word_suffix = "</w>";
  auto suffixed = make({{"a", 0}, {"b</w>", 1}, {"ab</w>", 2}, {"b", 3}}, {{"a", "b</w>"}}, s);
  EXPECT_EQ(ids(*suffixed, "ab"), (std::vector<int32_t>{2}));
  EXPECT_EQ(ids(*suffixed, "ba"), (std::vector<int32_t>{3}));  // "a</w>" unknown, dropped
}

TEST(BpeModel, IgnoreMerges) {
  // HF test_ignore_merges: a word in the vocabulary is one token even if
  // the merges would not produce it.
  Vocab v = {{".:.:", 0}, {"Ġbelirtilen", 1}, {".", 2},          {":", 3},      {"bel", 4},   {"irtilen", 5},
             {"Ġ", 6},    {".:", 7},          {"belirtilen", 8}, {".:.", 9},    {"be", 10},   {"l", 11},
             {"ir", 12},  {"ti", 13},         {"en", 14},        {"irtil", 15}, {"irti", 16}, {"i", 17},
             {"r", 18},   {"t", 19},          {"b", 20},         {"e", 21},     {"n", 22}};
  Merges m = {{".", ":"}, {"b", "e"}, {"be", "l"}, {"i", "r"}, {"t", "i"}, {"ir", "ti"}, {"e", "n"}, {"irti", "l"}};
  BpeOptions o;
  o.ignore_merges = true;
  auto bpe = make(v, m, o);
  EXPECT_EQ(ids(*bpe, ".:.:"), (std::vector<int32_t>{0}));
  EXPECT_EQ(ids(*bpe, "Ġbelirtilen"), (std::vector<int32_t>{1}));
  auto merging = make(v, m);
  EXPECT_EQ(ids(*merging, ".:.:"), (std::vector<int32_t>{7, 7}));
  EXPECT_EQ(ids(*merging, "Ġbelirtilen"), (std::vector<int32_t>{6, 4, 15, 14}));
}

TEST(BpeModel, CreationErrorsNameTheMerge) {
  auto r = BpeModel::create({{"a", 0}, {"b", 1}}, {{"a", "c"}}, {});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("model.merges[0]"), std::string::npos) << r.status().message();
  auto r2 = BpeModel::create({{"a", 0}, {"b", 1}}, {{"a", "b"}}, {});
  ASSERT_FALSE(r2.ok());
  EXPECT_NE(r2.status().message().find("'ab'"), std::string::npos) << r2.status().message();
}

TEST(BpeModel, IdsHaveGapsAndLookupsAreConsistent) {
  auto bpe = make({{"a", 0}, {"b", 5}}, {});
  EXPECT_EQ(bpe->vocab_count(), 2u);
  EXPECT_EQ(bpe->max_id(), 5);
  EXPECT_EQ(bpe->id_to_token(5), std::optional<std::string_view>("b"));
  EXPECT_EQ(bpe->id_to_token(3), std::nullopt);
  EXPECT_EQ(bpe->id_to_token(-1), std::nullopt);
  EXPECT_EQ(bpe->token_to_id("b"), std::optional<int32_t>(5));
}

// The rank-scan and heap merge loops agree on random merge tables and words
// of every length (the heap is HF's algorithm).
TEST(BpeMerge, ScanAndHeapAgree) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 200; ++trial) {
    PairMap merges;
    const int alphabet = 2 + trial % 5;
    int next_id = alphabet;
    const int n_merges = 1 + static_cast<int>(rng() % 40);
    for (int k = 0; k < n_merges; ++k) {
      const int32_t a = static_cast<int32_t>(rng() % next_id), b = static_cast<int32_t>(rng() % next_id);
      if (merges.find(a, b)) continue;
      merges.insert(a, b, {static_cast<uint32_t>(k), next_id++});
    }
    for (size_t len : {1u, 2u, 3u, 7u, 16u, 63u, 64u, 65u, 300u}) {
      std::vector<int32_t> word(len);
      for (auto& w : word) w = static_cast<int32_t>(rng() % alphabet);
      auto by_scan = word, by_heap = word;
      bpe_detail::merge_by_scan(merges, by_scan);
      bpe_detail::merge_by_heap(merges, by_heap);
      ASSERT_EQ(by_scan, by_heap) << "trial " << trial << " length " << len;
    }
  }
}

}  // namespace
}  // namespace m2::text::tok
