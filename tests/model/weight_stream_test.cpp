#include "model/weight_stream.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "../io/st_writer.h"
#include "../util/resident_bytes.h"

namespace m2 {
namespace {

constexpr int64_t kFloats = 1 << 18;  // 1 MiB tensors
constexpr int kPerShard = 16;

test::StTensor filled(int seed) {
  test::StTensor t = test::st_zeros("F32", {kFloats});
  for (size_t i = 0; i < t.bytes.size(); ++i) t.bytes[i] = static_cast<uint8_t>(i * 17 + seed * 101 + (i >> 9));
  return t;
}

// Three shards of sixteen 1 MiB tensors each; the tensor names sort in the
// opposite order of the shards, so that name order and shard order differ.
class WeightStream : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = test::temp_dir("weight_stream");
    nlohmann::json index;
    for (int s = 0; s < 3; ++s) {
      const std::string file = "model-0000" + std::to_string(s) + "-of-00003.safetensors";
      std::map<std::string, test::StTensor> tensors;
      for (int t = 0; t < kPerShard; ++t) {
        const std::string name = std::string(1, static_cast<char>('z' - s)) + ".t" + (t < 10 ? "0" : "") +
                                 std::to_string(t);
        tensors[name] = filled(s * kPerShard + t);
        index["weight_map"][name] = file;
      }
      test::st_write(dir_ + "/" + file, tensors);
    }
    std::ofstream(dir_ + "/model.safetensors.index.json") << index.dump();
    auto ck = Checkpoint::open(dir_);
    ASSERT_TRUE(ck.ok()) << ck.status().message();
    ck_ = std::move(*ck);
    for (const std::string& name : ck_->names()) {
      auto v = ck_->get(name);
      ASSERT_TRUE(v.ok());
      views_[name] = *v;
    }
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::string dir_;
  std::unique_ptr<Checkpoint> ck_;
  std::map<std::string, TensorView> views_;
};

TEST_F(WeightStream, CopiesRunShardByShardByOffsetThenTheRest) {
  std::vector<uint8_t> dummy(64);
  std::vector<WeightCopy> copies;
  copies.push_back({dummy.data(), dummy.size(), nullptr, "dummy"});
  for (const char* name : {"x.t03", "z.t01", "y.t00", "x.t00", "z.t03", "y.t02", "z.t00"})
    copies.push_back({views_.at(name).data, views_.at(name).nbytes(), nullptr, name});
  std::vector<std::string> got;
  for (size_t i : weight_stream_order(ck_.get(), copies)) got.push_back(copies[i].what);
  EXPECT_EQ(got, (std::vector<std::string>{"z.t00", "z.t01", "z.t03", "y.t00", "y.t02", "x.t00", "x.t03", "dummy"}));
}

TEST_F(WeightStream, CopiesEveryByteAndHoldsAtMostAWindowOfTheCheckpoint) {
  if (test::resident_bytes(ck_->file(0).mapped().data()) < 0) GTEST_SKIP() << "no /proc/self/smaps";
  std::map<std::string, std::vector<uint8_t>> out;
  std::vector<WeightCopy> copies;
  for (auto& [name, v] : views_) {
    out[name].resize(v.nbytes());
    copies.push_back({v.data, v.nbytes(), out[name].data(), name});
  }
  WeightStreamOptions options;
  options.readahead_bytes = 2u << 20;
  options.release_bytes = 1u << 20;
  // What opening the shards mapped (their headers' pages).
  std::vector<int64_t> opened(ck_->num_files());
  for (size_t i = 0; i < opened.size(); ++i) opened[i] = test::resident_bytes(ck_->file(i).mapped().data());
  int64_t most_resident = 0, resident_done = 0, ahead_growth = 0;
  size_t copied = 0;
  const Status s = stream_weights(
      ck_.get(), copies,
      [&](const WeightCopy& c) {
        const size_t shard = ck_->locate(c.src)->file;
        for (size_t i = 0; i < ck_->num_files(); ++i) {
          const int64_t r = test::resident_bytes(ck_->file(i).mapped().data());
          if (i == shard) most_resident = std::max(most_resident, r);
          if (i < shard) resident_done = std::max(resident_done, r);
          if (i > shard) ahead_growth = std::max(ahead_growth, r - opened[i]);
        }
        std::memcpy(c.dst, c.src, c.bytes);
        ++copied;
        return Status();
      },
      options);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(copied, copies.size());
  // Before each copy the shard being copied holds at most what was copied
  // since the last release (under 1 MiB + a tensor; two more huge pages
  // where the file is mapped with them), not its 16 MiB; a finished shard
  // holds nothing (released whole), and one not reached yet no more than
  // its opening mapped (the readahead fills the page cache, not this
  // process's pages).
  EXPECT_LE(most_resident, (6 << 20));
  EXPECT_EQ(resident_done, 0);
  EXPECT_LE(ahead_growth, 0);
  for (size_t i = 0; i < ck_->num_files(); ++i) EXPECT_EQ(test::resident_bytes(ck_->file(i).mapped().data()), 0);
  // Every byte arrived, and the views stay valid: their bytes fault in again.
  for (const auto& [name, v] : views_) EXPECT_EQ(std::memcmp(out[name].data(), v.data, v.nbytes()), 0) << name;
}

TEST_F(WeightStream, LargeCopiesGoInPieces) {
  const TensorView& v = views_.at("y.t05");
  std::vector<uint8_t> host(3 * 100000 + 7, 9), out_host(host.size()), out_view(v.nbytes());
  std::vector<WeightCopy> copies = {{host.data(), host.size(), out_host.data(), "host"},
                                    {v.data, v.nbytes(), out_view.data(), "y.t05"}};
  WeightStreamOptions options;
  options.release_bytes = 100000;
  uint64_t largest = 0;
  int pieces = 0;
  const Status s = stream_weights(
      ck_.get(), copies,
      [&](const WeightCopy& c) {
        largest = std::max(largest, c.bytes);
        ++pieces;
        std::memcpy(c.dst, c.src, c.bytes);
        return Status();
      },
      options);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(largest, 100000u);
  EXPECT_EQ(pieces, 11 + 4);  // 1 MiB in pieces of 100000 bytes, then 3 x 100000 + 7
  EXPECT_EQ(out_host, host);
  EXPECT_EQ(std::memcmp(out_view.data(), v.data, v.nbytes()), 0);
}

// A tensor-parallel column slice: columns [300, 700) bytes of the 1 MiB
// tensor read as 1024 rows of 1024 bytes, packed, in pieces of whole rows
// that never read past the slice's last row.
TEST_F(WeightStream, StridedCopiesPackTheirRowsInPiecesOfWholeRows) {
  const TensorView& v = views_.at("x.t07");
  constexpr uint64_t kPitch = 1024, kRows = 1024, kBegin = 300, kWidth = 400;
  const auto* base = static_cast<const uint8_t*>(v.data);
  std::vector<uint8_t> out(kRows * kWidth, 0);
  WeightCopy c{base + kBegin, kRows * kWidth, out.data(), "x.t07", kWidth, kPitch};
  EXPECT_EQ(c.span(), (kRows - 1) * kPitch + kWidth);
  WeightStreamOptions options;
  options.release_bytes = 100000;  // 97 rows a piece
  uint64_t largest = 0, last_end = 0;
  int pieces = 0;
  const Status s = stream_weights(
      ck_.get(), {c},
      [&](const WeightCopy& p) {
        EXPECT_TRUE(p.strided());
        EXPECT_EQ(p.bytes % kWidth, 0u);
        EXPECT_EQ((static_cast<const uint8_t*>(p.src) - base - kBegin) % kPitch, 0u);  // starts on a row
        largest = std::max(largest, p.bytes);
        last_end = static_cast<const uint8_t*>(p.src) - base + p.span();
        ++pieces;
        for (uint64_t r = 0; r < p.bytes / kWidth; ++r)
          std::memcpy(static_cast<uint8_t*>(p.dst) + r * kWidth, static_cast<const uint8_t*>(p.src) + r * kPitch,
                      kWidth);
        return Status();
      },
      options);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(largest, 97 * kWidth);
  EXPECT_EQ(pieces, 11);  // ceil(1024 / 97)
  EXPECT_EQ(last_end, (kRows - 1) * kPitch + kBegin + kWidth);
  for (uint64_t r = 0; r < kRows; ++r)
    ASSERT_EQ(std::memcmp(out.data() + r * kWidth, base + r * kPitch + kBegin, kWidth), 0) << "row " << r;
}

TEST_F(WeightStream, AFailedCopyNamesItsShardAndTensor) {
  std::vector<WeightCopy> copies;
  for (auto& [name, v] : views_) copies.push_back({v.data, v.nbytes(), nullptr, name});
  const Status s = stream_weights(
      ck_.get(), copies,
      [](const WeightCopy& c) { return c.what == "y.t02" ? errorf("{}: no room", c.what) : Status(); },
      WeightStreamOptions());
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("model-00001-of-00003.safetensors: tensor 'y.t02' (byte "), std::string::npos)
      << s.message();
  EXPECT_NE(s.message().find("y.t02: no room"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace m2
