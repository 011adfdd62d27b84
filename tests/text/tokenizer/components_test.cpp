// Normalizers, pre-tokenizers and decoders built from their JSON. Expected
// values come from HF tokenizers (its docs and unit tests, or its Python
// API on the same input).
#include <gtest/gtest.h>

#include "text/tokenizer/decoders.h"
#include "text/tokenizer/normalizers.h"
#include "text/tokenizer/pre_tokenizers.h"

namespace m2::text::tok {
namespace {

std::string normalize(const Json& spec, std::string text) {
  auto n = make_normalizer(JsonNode{spec, "normalizer"});
  EXPECT_TRUE(n.ok()) << n.status().message();
  EXPECT_TRUE((*n)->normalize(text).ok());
  return text;
}

TEST(Normalizers, UnicodeFormsMatchHf) {
  EXPECT_EQ(normalize({{"type", "NFC"}}, "e\xCC\x81"), "\xC3\xA9");  // e + acute -> é
  EXPECT_EQ(normalize({{"type", "NFD"}}, "\xC3\xA9"), "e\xCC\x81");
  EXPECT_EQ(normalize({{"type", "NFC"}}, "\xE2\x84\xAB"), "\xC3\x85");  // Angstrom sign -> Å
  EXPECT_EQ(normalize({{"type", "NFKC"}}, "\xEF\xAC\x81"), "fi");       // ﬁ
  EXPECT_EQ(normalize({{"type", "NFKD"}}, "\xE2\x91\xA0"), "1");        // ①
  EXPECT_EQ(normalize({{"type", "NFC"}}, "\xE1\x84\x80\xE1\x85\xA1\xE1\x86\xA8"), "\xEA\xB0\x81");  // jamo -> 각
  // Marks are put in canonical order: U+0316 (class 220) before U+0301 (230).
  EXPECT_EQ(normalize({{"type", "NFD"}}, "a\xCC\x81\xCC\x96"), "a\xCC\x96\xCC\x81");
  // HF's normalization data predate Unicode 12: U+32FF (Reiwa, 12.1) keeps
  // its form under NFKC, and U+1AC1 (14.0) is a starter that is not moved.
  EXPECT_EQ(normalize({{"type", "NFKC"}}, "\xE3\x8B\xBF"), "\xE3\x8B\xBF");
  EXPECT_EQ(normalize({{"type", "NFD"}}, "a\xE1\xAB\x81\xCC\x96"), "a\xE1\xAB\x81\xCC\x96");
}

TEST(Normalizers, TextTransforms) {
  EXPECT_EQ(normalize({{"type", "Lowercase"}}, "Hello \xC4\xB0STANBUL \xCE\xA3"), "hello i\xCC\x87stanbul \xCF\x83");
  EXPECT_EQ(normalize({{"type", "Prepend"}, {"prepend", "\xE2\x96\x81"}}, "hi"), "\xE2\x96\x81hi");
  EXPECT_EQ(normalize({{"type", "Prepend"}, {"prepend", "x"}}, ""), "");
  EXPECT_EQ(normalize({{"type", "Strip"}, {"strip_left", true}, {"strip_right", false}},
                      " \t\xE3\x80\x80"
                      "a b \n"),
            "a b \n");
  EXPECT_EQ(normalize({{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", "\xE2\x96\x81"}}, "a b  c"),
            "a\xE2\x96\x81"
            "b\xE2\x96\x81\xE2\x96\x81"
            "c");
  EXPECT_EQ(normalize({{"type", "Replace"}, {"pattern", {{"Regex", "\\s+"}}}, {"content", " "}}, "a \t\n b"), "a b");
  const Json seq = {{"type", "Sequence"},
                    {"normalizers", Json::array({Json{{"type", "NFKC"}}, Json{{"type", "Lowercase"}}})}};
  EXPECT_EQ(normalize(seq, "\xEF\xBC\xA1\xEF\xBC\xA2"), "ab");  // fullwidth AB
}

TEST(Normalizers, UnknownTypesAndOptionsAreRefused) {
  auto bert = make_normalizer(JsonNode{Json{{"type", "BertNormalizer"}}, "normalizer"});
  ASSERT_FALSE(bert.ok());
  EXPECT_NE(bert.status().message().find("normalizer: unsupported normalizer type 'BertNormalizer'"),
            std::string::npos);
  const Json nested = {{"type", "Sequence"},
                       {"normalizers", Json::array({Json{{"type", "NFC"}}, Json{{"type", "Precompiled"}}})}};
  auto inner = make_normalizer(JsonNode{nested, "normalizer"});
  ASSERT_FALSE(inner.ok());
  EXPECT_NE(inner.status().message().find("normalizer.normalizers[1]"), std::string::npos) << inner.status().message();
  auto extra = make_normalizer(JsonNode{Json{{"type", "NFC"}, {"bogus", 1}}, "normalizer"});
  ASSERT_FALSE(extra.ok());
  EXPECT_NE(extra.status().message().find("'bogus'"), std::string::npos);
}

std::vector<std::string> pre_tokenize(const Json& spec, const std::string& text) {
  auto p = make_pre_tokenizer(JsonNode{spec, "pre_tokenizer"});
  EXPECT_TRUE(p.ok()) << p.status().message();
  PieceList list;
  list.text = text;
  list.pieces.push_back({0, static_cast<uint32_t>(text.size()), true});
  EXPECT_TRUE((*p)->apply(list).ok());
  std::vector<std::string> out;
  for (const auto& piece : list.pieces) out.emplace_back(list.view(piece));
  return out;
}

using Pieces = std::vector<std::string>;

TEST(PreTokenizers, SplitBehaviorsAsDocumentedByHf) {
  auto split = [](const char* behavior, bool invert) {
    return Json{{"type", "Split"}, {"pattern", {{"String", "-"}}}, {"behavior", behavior}, {"invert", invert}};
  };
  const std::string text = "the-final--countdown";
  EXPECT_EQ(pre_tokenize(split("Removed", false), text), (Pieces{"the", "final", "countdown"}));
  EXPECT_EQ(pre_tokenize(split("Isolated", false), text), (Pieces{"the", "-", "final", "-", "-", "countdown"}));
  EXPECT_EQ(pre_tokenize(split("MergedWithPrevious", false), text), (Pieces{"the-", "final-", "-", "countdown"}));
  EXPECT_EQ(pre_tokenize(split("MergedWithNext", false), text), (Pieces{"the", "-final", "-", "-countdown"}));
  EXPECT_EQ(pre_tokenize(split("Contiguous", false), text), (Pieces{"the", "-", "final", "--", "countdown"}));
  EXPECT_EQ(pre_tokenize(split("Removed", true), text), (Pieces{"-", "-", "-"}));
  EXPECT_EQ(pre_tokenize(split("MergedWithPrevious", true), text), (Pieces{"the", "-final", "-", "-countdown"}));
  EXPECT_EQ(pre_tokenize(split("MergedWithNext", true), text), (Pieces{"the-", "final-", "-", "countdown"}));
}

TEST(PreTokenizers, ByteLevelMapsBytesAndSplitsLikeGpt2) {
  const Json gpt2 = {{"type", "ByteLevel"}, {"add_prefix_space", true}, {"use_regex", true}};
  EXPECT_EQ(pre_tokenize(gpt2, "Hello world's 42!"), (Pieces{"\xC4\xA0Hello", "\xC4\xA0world", "'s",
                                                             "\xC4\xA0"
                                                             "42",
                                                             "!"}));
  const Json bytes = {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}};
  EXPECT_EQ(pre_tokenize(bytes, "a \n\xC3\xA9"), (Pieces{"a\xC4\xA0\xC4\x8A\xC3\x83\xC2\xA9"}));
}

TEST(PreTokenizers, DigitsWhitespaceMetaspace) {
  EXPECT_EQ(pre_tokenize({{"type", "Digits"}, {"individual_digits", true}},
                         "a12\xD9\xA3"
                         "b"),
            (Pieces{"a", "1", "2", "\xD9\xA3", "b"}));
  EXPECT_EQ(pre_tokenize({{"type", "Digits"}, {"individual_digits", false}}, "a12b3"), (Pieces{"a", "12", "b", "3"}));
  EXPECT_EQ(pre_tokenize({{"type", "Whitespace"}}, "Hey man!  How"), (Pieces{"Hey", "man", "!", "How"}));
  EXPECT_EQ(pre_tokenize({{"type", "WhitespaceSplit"}}, "Hey, man,\tGood?"), (Pieces{"Hey,", "man,", "Good?"}));
  EXPECT_EQ(pre_tokenize({{"type", "Metaspace"}, {"replacement", "\xE2\x96\x81"}, {"prepend_scheme", "always"}},
                         "Hey   friend!"),
            (Pieces{"\xE2\x96\x81Hey", "\xE2\x96\x81", "\xE2\x96\x81",
                    "\xE2\x96\x81"
                    "friend!"}));
}

TEST(PreTokenizers, UnsupportedTypesAreRefused) {
  const Json seq = {{"type", "Sequence"}, {"pretokenizers", Json::array({Json{{"type", "BertPreTokenizer"}}})}};
  auto p = make_pre_tokenizer(JsonNode{seq, "pre_tokenizer"});
  ASSERT_FALSE(p.ok());
  EXPECT_NE(
      p.status().message().find("pre_tokenizer.pretokenizers[0]: unsupported pre-tokenizer type 'BertPreTokenizer'"),
      std::string::npos)
      << p.status().message();
  const Json bad_regex = {{"type", "Split"}, {"pattern", {{"Regex", "[[:alpha:]]"}}}, {"behavior", "Isolated"}};
  auto r = make_pre_tokenizer(JsonNode{bad_regex, "pre_tokenizer"});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("pattern.Regex"), std::string::npos) << r.status().message();
}

std::string decode(const Json& spec, std::vector<std::string> tokens) {
  auto d = make_decoder(JsonNode{spec, "decoder"});
  EXPECT_TRUE(d.ok()) << d.status().message();
  EXPECT_TRUE((*d)->decode_chain(tokens).ok());
  std::string out;
  for (const auto& t : tokens) out += t;
  return out;
}

TEST(Decoders, MatchHf) {
  const Json fallback = {{"type", "ByteFallback"}};
  EXPECT_EQ(decode(fallback, {"<0x61>"}), "a");
  EXPECT_EQ(decode(fallback, {"<0xE5>", "<0x8f>", "<0xab>", "a"}),
            "\xE5\x8F\xAB"
            "a");
  EXPECT_EQ(decode(fallback, {"<0xE5>", "<0x8f>", "a"}),
            "\xEF\xBF\xBD\xEF\xBF\xBD"
            "a");
  const Json meta = {{"type", "Metaspace"}, {"replacement", "\xE2\x96\x81"}, {"prepend_scheme", "always"}};
  EXPECT_EQ(decode(meta, {"\xE2\x96\x81Hey",
                          "\xE2\x96\x81"
                          "friend!",
                          "\xE2\x96\x81\xE2\x96\x81x"}),
            "Hey friend!  x");
  EXPECT_EQ(decode({{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}}, {" a", "  b ", "c"}), "a b c");
  EXPECT_EQ(decode({{"type", "Strip"}, {"content", "x"}, {"start", 2}, {"stop", 2}}, {"xxaxx", "xxxbxxx", "xyx"}),
            "axbxy");
  // "Ã©" stands for bytes C3 A9 (é); "é" alone for byte E9, a lone lead byte.
  EXPECT_EQ(decode({{"type", "ByteLevel"}}, {"\xC4\xA0Hello", "<think>", "\xC3\x83\xC2\xA9"}), " Hello<think>\xC3\xA9");
  EXPECT_EQ(decode({{"type", "ByteLevel"}}, {"\xC3\xA9"}), "\xEF\xBF\xBD");
  EXPECT_EQ(decode({{"type", "BPEDecoder"}, {"suffix", "</w>"}}, {"hel", "lo</w>", "you</w>"}), "hello you");
}

TEST(Decoders, StreamingCapabilities) {
  auto make = [](const Json& spec) { return std::move(make_decoder(JsonNode{spec, "decoder"})).value(); };
  EXPECT_TRUE(make({{"type", "ByteLevel"}})->is_byte_level());
  const Json llama = {
      {"type", "Sequence"},
      {"decoders", Json::array({Json{{"type", "Replace"}, {"pattern", {{"String", "\xE2\x96\x81"}}}, {"content", " "}},
                                Json{{"type", "ByteFallback"}}, Json{{"type", "Fuse"}},
                                Json{{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}}})}};
  auto d = make(llama);
  EXPECT_FALSE(d->is_byte_level());
  EXPECT_TRUE(d->window_exact(false));
  EXPECT_TRUE(d->awaits_more("<0xE5>"));
  EXPECT_FALSE(d->awaits_more("a"));
  const Json joined_replace = {
      {"type", "Sequence"},
      {"decoders", Json::array({Json{{"type", "ByteLevel"}},
                                Json{{"type", "Replace"}, {"pattern", {{"Regex", "a+"}}}, {"content", "b"}}})}};
  EXPECT_FALSE(make(joined_replace)->window_exact(false));
}

}  // namespace
}  // namespace m2::text::tok
