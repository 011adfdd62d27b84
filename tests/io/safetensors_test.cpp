// The safetensors reader on valid files and on everything a truncated or
// hostile file can get wrong: each case must give an error naming the file
// (and the tensor), never a crash.
#include "io/safetensors.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>

#include "st_writer.h"

namespace m2 {
namespace {

using test::StTensor;

class SafetensorsTest : public ::testing::Test {
 protected:
  std::string dir = test::temp_dir("st");
  std::string path = dir + "/model.safetensors";

  // Writes `header_json` (raw text) + `data_bytes` zero bytes and opens it.
  Status open_raw(const std::string& header_json, size_t data_bytes, int64_t declared = -1) {
    test::st_write_raw(path, header_json, std::string(data_bytes, '\0'),
                       declared < 0 ? header_json.size() : static_cast<uint64_t>(declared));
    return SafetensorsFile::open(path).status();
  }
  void expect_error(const Status& s, const std::string& needle) {
    ASSERT_FALSE(s.ok()) << "expected an error containing: " << needle;
    EXPECT_NE(s.message().find(needle), std::string::npos) << s.message();
    EXPECT_NE(s.message().find(path), std::string::npos) << "message must name the file: " << s.message();
  }
};

TEST_F(SafetensorsTest, ReadsValidFileZeroCopy) {
  StTensor a = test::st_zeros("F32", {2, 3});
  float v = 1.5f;
  std::memcpy(a.bytes.data() + 4, &v, 4);
  StTensor b = test::st_zeros("F8_E4M3", {4});
  b.bytes = {0x38, 0x7e, 0x01, 0x80};
  test::st_write(path, {{"a", a}, {"b", b}, {"empty", test::st_zeros("BF16", {0, 5})}});
  auto f = SafetensorsFile::open(path);
  ASSERT_TRUE(f.ok()) << f.status().message();
  EXPECT_EQ((*f)->metadata().at("format"), "pt");
  const SafetensorsEntry* e = (*f)->find("a");
  ASSERT_NE(e, nullptr);
  TensorView t = (*f)->view(*e);
  EXPECT_EQ(t.shape, (Shape{2, 3}));
  EXPECT_EQ(t.as<float>()[1], 1.5f);
  EXPECT_GE(static_cast<const uint8_t*>(t.data), (*f)->mapped().data());  // points into the mapping
  TensorView f8 = (*f)->view(*(*f)->find("b"));
  EXPECT_EQ(f8.dtype, DType::kF8E4M3);
  EXPECT_EQ(tensor_get_f32(f8, 1), 448.0f);
}

TEST_F(SafetensorsTest, ShorterThanLengthField) {
  { std::ofstream(path, std::ios::binary) << "abc"; }
  expect_error(SafetensorsFile::open(path).status(), "too short");
}

TEST_F(SafetensorsTest, HeaderLengthPastEndOfFile) {
  expect_error(open_raw("{}", 0, 1000), "exceeds");
}

TEST_F(SafetensorsTest, HeaderLengthOverLimit) {
  expect_error(open_raw("{}", 0, int64_t(1) << 40), "limit");
}

TEST_F(SafetensorsTest, HeaderNotJson) { expect_error(open_raw("{\"a\": [1, 2", 0), "not valid JSON"); }

TEST_F(SafetensorsTest, NumberNoTypeHoldsIsAnErrorNotAnException) {
  // Found by tests/fuzz/fuzz_safetensors.cpp: the JSON parser's out_of_range
  // escaped the loader (only its parse_error was caught) and ended the process.
  expect_error(open_raw("{\"w\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [0, 7E777]}}", 0),
               "cannot be read");
}

TEST_F(SafetensorsTest, HeaderNotObject) { expect_error(open_raw("[1, 2, 3]", 0), "expected an object"); }

TEST_F(SafetensorsTest, UnknownDtype) {
  expect_error(open_raw(R"({"w": {"dtype": "F8_E5M2", "shape": [1], "data_offsets": [0, 1]}})", 1),
               "unsupported dtype 'F8_E5M2'");
}

TEST_F(SafetensorsTest, NegativeShape) {
  expect_error(open_raw(R"({"w": {"dtype": "F32", "shape": [-1], "data_offsets": [0, 4]}})", 4), "shape[0]");
}

TEST_F(SafetensorsTest, MissingOffsets) {
  expect_error(open_raw(R"({"w": {"dtype": "F32", "shape": [1]}})", 4), "data_offsets");
}

TEST_F(SafetensorsTest, OffsetsPastEndOfData) {
  expect_error(open_raw(R"({"w": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}})", 8),
               "run past the end");
}

TEST_F(SafetensorsTest, ByteLengthDisagreesWithShape) {
  expect_error(open_raw(R"({"w": {"dtype": "BF16", "shape": [3], "data_offsets": [0, 4]}})", 4),
               "needs 6 bytes");
}

TEST_F(SafetensorsTest, ReversedOffsets) {
  expect_error(open_raw(R"({"w": {"dtype": "F32", "shape": [0], "data_offsets": [4, 0]}})", 4), "end before");
}

TEST_F(SafetensorsTest, OverlappingTensors) {
  expect_error(open_raw(R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                            "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}})", 12),
               "overlaps");
}

TEST_F(SafetensorsTest, GapBetweenTensors) {
  expect_error(open_raw(R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]},
                            "b": {"dtype": "F32", "shape": [1], "data_offsets": [8, 12]}})", 12),
               "unused bytes before tensor 'b'");
}

TEST_F(SafetensorsTest, TrailingBytes) {
  expect_error(open_raw(R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}})", 9), "trailing bytes");
}

TEST_F(SafetensorsTest, DuplicateTensorName) {
  expect_error(open_raw(R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]},
                            "a": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}})", 8),
               "appears twice");
}

TEST_F(SafetensorsTest, MetadataMustBeStrings) {
  expect_error(open_raw(R"({"__metadata__": {"n": 1}})", 0), "__metadata__['n']");
}

TEST_F(SafetensorsTest, HugeShapeDoesNotOverflow) {
  expect_error(open_raw(R"({"w": {"dtype": "F32", "shape": [4294967296, 4294967296, 4294967296],
                               "data_offsets": [0, 0]}})", 0), "too large");
}

TEST_F(SafetensorsTest, TruncatedRealFileIsRejected) {
  test::st_write(path, {{"a", test::st_zeros("F32", {1000})}});
  std::filesystem::resize_file(path, std::filesystem::file_size(path) - 100);
  expect_error(SafetensorsFile::open(path).status(), "file truncated?");
}

TEST_F(SafetensorsTest, RandomCorruptionNeverCrashes) {
  test::st_write(path, {{"a", test::st_zeros("F32", {3, 5})}, {"b", test::st_zeros("BF16", {7})}});
  std::ifstream in(path, std::ios::binary);
  std::string good((std::istreambuf_iterator<char>(in)), {});
  uint32_t state = 12345;
  for (int i = 0; i < 1000; ++i) {
    std::string bad = good;
    const int flips = 1 + i % 4;
    for (int f = 0; f < flips; ++f) {
      state = state * 1664525u + 1013904223u;
      bad[state % std::min<size_t>(bad.size(), 200)] = static_cast<char>(state >> 24);
    }
    if (i % 7 == 0) bad.resize(state % bad.size());
    { std::ofstream(path, std::ios::binary | std::ios::trunc) << bad; }
    auto f = SafetensorsFile::open(path);  // must return, ok or not
    if (f.ok()) {
      for (const auto& [name, e] : (*f)->entries()) ASSERT_LE(e.offset + e.nbytes, bad.size());
    }
  }
}

// ---- sharded checkpoints ----------------------------------------------------

void write_index(const std::string& dir, const nlohmann::json& weight_map) {
  std::ofstream(dir + "/model.safetensors.index.json") << nlohmann::json{{"weight_map", weight_map}}.dump();
}

TEST(Checkpoint, ShardedThroughIndex) {
  const std::string dir = test::temp_dir("ck_ok");
  test::st_write(dir + "/s1.safetensors", {{"a", test::st_zeros("F32", {2})}});
  test::st_write(dir + "/s2.safetensors", {{"b", test::st_zeros("BF16", {3})}});
  write_index(dir, {{"a", "s1.safetensors"}, {"b", "s2.safetensors"}});
  auto ck = Checkpoint::open(dir);
  ASSERT_TRUE(ck.ok()) << ck.status().message();
  EXPECT_EQ((*ck)->num_files(), 2u);
  EXPECT_EQ((*ck)->get("b")->shape, (Shape{3}));
  auto missing = (*ck)->get("c");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("missing tensor 'c'"), std::string::npos);
}

// Shards are numbered in file-name order (a streaming reader walks them so),
// not in the index's (alphabetical) tensor order, and a view's bytes are
// found back in their shard.
TEST(Checkpoint, ShardsInFileNameOrderAndLocate) {
  const std::string dir = test::temp_dir("ck_order");
  test::st_write(dir + "/model-00000-of-00002.safetensors", {{"z", test::st_zeros("F32", {2})}});
  test::st_write(dir + "/model-00001-of-00002.safetensors",
                 {{"a", test::st_zeros("F32", {4})}, {"b", test::st_zeros("F32", {3})}});
  write_index(dir, {{"a", "model-00001-of-00002.safetensors"}, {"b", "model-00001-of-00002.safetensors"},
                    {"z", "model-00000-of-00002.safetensors"}});
  auto ck = Checkpoint::open(dir);
  ASSERT_TRUE(ck.ok()) << ck.status().message();
  ASSERT_EQ((*ck)->num_files(), 2u);
  EXPECT_NE((*ck)->file(0).path().find("model-00000-of"), std::string::npos);
  EXPECT_NE((*ck)->file(1).path().find("model-00001-of"), std::string::npos);
  const TensorView b = (*ck)->get("b").value();
  const auto loc = (*ck)->locate(b.data);
  ASSERT_TRUE(loc.has_value());
  EXPECT_EQ(loc->file, 1u);
  EXPECT_EQ(loc->offset, (*ck)->entry("b")->offset);
  int elsewhere = 0;
  EXPECT_FALSE((*ck)->locate(&elsewhere).has_value());
}

TEST(Checkpoint, SingleFile) {
  const std::string dir = test::temp_dir("ck_single");
  test::st_write(dir + "/model.safetensors", {{"a", test::st_zeros("F32", {2})}});
  auto ck = Checkpoint::open(dir);
  ASSERT_TRUE(ck.ok()) << ck.status().message();
  EXPECT_TRUE((*ck)->has("a"));
}

TEST(Checkpoint, Errors) {
  struct Case {
    const char* name;
    nlohmann::json weight_map;
    const char* needle;
  };
  const std::vector<Case> cases = {
      {"listed_but_absent", {{"a", "s1.safetensors"}, {"zz", "s1.safetensors"}}, "does not hold it"},
      {"unlisted_tensor", {{"a", "s1.safetensors"}, {"b", "s2.safetensors"}}, "'c' which the index does not list"},
      {"wrong_shard", {{"a", "s2.safetensors"}, {"b", "s2.safetensors"}}, "does not hold it"},
      {"missing_file", {{"a", "nope.safetensors"}}, "cannot open"},
      {"path_traversal", {{"a", "../s1.safetensors"}}, "not a plain file name"},
      {"not_string", {{"a", 3}}, "expected a file name"},
  };
  for (const Case& c : cases) {
    const std::string dir = test::temp_dir(std::string("ck_") + c.name);
    test::st_write(dir + "/s1.safetensors", {{"a", test::st_zeros("F32", {2})}, {"c", test::st_zeros("F32", {1})}});
    test::st_write(dir + "/s2.safetensors", {{"b", test::st_zeros("F32", {2})}});
    write_index(dir, c.weight_map);
    auto ck = Checkpoint::open(dir);
    ASSERT_FALSE(ck.ok()) << c.name;
    EXPECT_NE(ck.status().message().find(c.needle), std::string::npos) << c.name << ": " << ck.status().message();
  }
  auto none = Checkpoint::open(test::temp_dir("ck_empty"));
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.status().message().find("no model.safetensors"), std::string::npos);
}

}  // namespace
}  // namespace m2
