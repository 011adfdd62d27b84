// Added tokens: id assignment and matching with lstrip / rstrip /
// single_word / normalized. The cases and expected splits are those of HF
// tokenizers' own unit tests (tokenizer/added_vocabulary.rs).
#include "text/tokenizer/added_vocabulary.h"

#include <gtest/gtest.h>

#include "text/tokenizer/bpe_model.h"
#include "text/tokenizer/normalizers.h"

namespace m2::text::tok {
namespace {

struct Fixture {
  std::unique_ptr<BpeModel> model;
  std::unique_ptr<Normalizer> normalizer;
  AddedVocabulary added;
};

Json token(const std::string& content, bool special, bool single_word = false, bool lstrip = false,
           bool rstrip = false) {
  // AddedToken::from(content, special): normalized = !special.
  return Json{{"content", content},         {"special", special}, {"normalized", !special},
              {"single_word", single_word}, {"lstrip", lstrip},   {"rstrip", rstrip}};
}

Fixture build(const Json& list, std::vector<std::pair<std::string, int32_t>> vocab = {}) {
  Fixture f;
  f.model = std::move(BpeModel::create(std::move(vocab), {}, {})).value();
  const Json lowercase = {{"type", "Lowercase"}};
  f.normalizer = std::move(make_normalizer(JsonNode{lowercase, "normalizer"})).value();
  auto added = AddedVocabulary::build(JsonNode{list, "added_tokens"}, *f.model, f.normalizer.get());
  EXPECT_TRUE(added.ok()) << added.status().message();
  f.added = std::move(added).value();
  return f;
}

// HF's extract_and_normalize: raw matches, then normalized matches in each
// normalized remainder. Returns (text, id or -1) per split.
std::vector<std::pair<std::string, int32_t>> extract(const Fixture& f, const std::string& text) {
  std::vector<std::pair<std::string, int32_t>> out;
  std::vector<Segment> raw, norm;
  f.added.split(text, false, raw);
  for (const Segment& s : raw) {
    std::string piece = text.substr(s.begin, s.end - s.begin);
    if (s.id >= 0) {
      out.emplace_back(piece, s.id);
      continue;
    }
    EXPECT_TRUE(f.normalizer->normalize(piece).ok());
    norm.clear();
    f.added.split(piece, true, norm);
    for (const Segment& n : norm) out.emplace_back(piece.substr(n.begin, n.end - n.begin), n.id);
  }
  return out;
}

using Splits = std::vector<std::pair<std::string, int32_t>>;

TEST(AddedVocabulary, OptionsUseCases) {
  const Json list = Json::array({token("my", false, false, true, true), token("name", false), token("ony", false, true),
                                 token("[CLS]", true), token("[SEP]", true)});
  const Fixture f = build(list);
  EXPECT_EQ(extract(f, "[CLS] My name is Anthony [SEP]"),
            (Splits{{"[CLS]", 3}, {" my ", 0}, {"name", 1}, {" is anthony ", -1}, {"[SEP]", 4}}));
}

TEST(AddedVocabulary, SingleWord) {
  const Fixture f = build(Json::array({token("<mask>", false, true)}));
  EXPECT_EQ(extract(f, "<mask> My name <mask> A<mask> <mask>ony <mask>"),
            (Splits{{"<mask>", 0}, {" my name ", -1}, {"<mask>", 0}, {" a<mask> <mask>ony ", -1}, {"<mask>", 0}}));
  // Punctuation is not a word character, a combining mark is.
  EXPECT_EQ(extract(f, "<mask>, <mask>- \xE2\x97\x8C\xCC\xB0<mask>"),
            (Splits{{"<mask>", 0}, {", ", -1}, {"<mask>", 0}, {"- \xE2\x97\x8C\xCC\xB0<mask>", -1}}));
}

TEST(AddedVocabulary, StripsUnicodeSpace) {
  const Fixture f = build(Json::array({token("<mask>", false, true, true, true)}));
  EXPECT_EQ(extract(f, "Hi <mask> there\t<mask>\t<mask>\xE2\x80\x80"),
            (Splits{{"hi", -1}, {" <mask> ", 0}, {"there", -1}, {"\t<mask>\t", 0}, {"<mask>\xE2\x80\x80", 0}}));
}

TEST(AddedVocabulary, LongestMatchAtTheLeftmostPosition) {
  const Fixture f = build(Json::array({token("<a>", true), token("<a><b>", true), token("b>", true)}));
  EXPECT_EQ(extract(f, "x<a><b>y<a>b>"), (Splits{{"x", -1}, {"<a><b>", 1}, {"y", -1}, {"<a>", 0}, {"b>", 2}}));
}

TEST(AddedVocabulary, IdsAreAssignedAsHfDoes) {
  // A token in the vocabulary keeps its id; others follow the vocabulary
  // size whatever the file says (HF warns and does the same).
  Json list = Json::array({token("b", true), token("<x>", true), token("<y>", false)});
  list[1]["id"] = 100;
  list[2]["id"] = 101;
  const Fixture f = build(list, {{"a", 0}, {"b", 1}, {"c", 2}});
  EXPECT_EQ(f.added.token_to_id("b"), std::optional<int32_t>(1));
  EXPECT_EQ(f.added.token_to_id("<x>"), std::optional<int32_t>(3));
  EXPECT_EQ(f.added.token_to_id("<y>"), std::optional<int32_t>(4));
  EXPECT_EQ(f.added.max_id(), 4);
  EXPECT_TRUE(f.added.special_contents().contains("<x>"));
  EXPECT_FALSE(f.added.special_contents().contains("<y>"));
  // A normalized token decodes as its normalized content.
  const Fixture g = build(Json::array({token("MiXed", false)}));
  EXPECT_EQ(g.added.text_of(0), std::optional<std::string_view>("mixed"));
}

TEST(AddedVocabulary, BadEntriesNameTheirPath) {
  Fixture f;
  f.model = std::move(BpeModel::create({}, {}, {})).value();
  const Json list = Json::array({Json{{"content", "<a>"}}, Json{{"content", 5}}});
  auto added = AddedVocabulary::build(JsonNode{list, "added_tokens"}, *f.model, nullptr);
  ASSERT_FALSE(added.ok());
  EXPECT_NE(added.status().message().find("added_tokens[1].content"), std::string::npos) << added.status().message();
}

}  // namespace
}  // namespace m2::text::tok
