#include "util/mapped_file.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "resident_bytes.h"

namespace m2 {
namespace {

uint8_t pattern(size_t i) { return static_cast<uint8_t>(i * 131 + (i >> 12) * 7 + 3); }

class MappedFileRelease : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = (std::filesystem::temp_directory_path() / ("m2cpp_mapped_" + std::to_string(getpid()))).string();
    std::vector<uint8_t> bytes(kSize);
    for (size_t i = 0; i < kSize; ++i) bytes[i] = pattern(i);
    std::ofstream(path_, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()), kSize);
    auto f = MappedFile::open(path_);
    ASSERT_TRUE(f.ok()) << f.status().message();
    file_ = std::move(*f);
    if (test::resident_bytes(file_->data()) < 0) GTEST_SKIP() << "no /proc/self/smaps";
  }
  void TearDown() override { std::filesystem::remove(path_); }

  // Reads every byte through the mapping (faulting it in) and checks it.
  void read_all_and_check() {
    size_t bad = 0;
    for (size_t i = 0; i < kSize; ++i) bad += file_->data()[i] != pattern(i);
    EXPECT_EQ(bad, 0u);
  }
  int64_t resident() const { return test::resident_bytes(file_->data()); }

  static constexpr size_t kSize = (8u << 20) + 123;  // ends inside a page
  std::string path_;
  std::unique_ptr<MappedFile> file_;
};

TEST_F(MappedFileRelease, DropsTheWholePagesInsideTheRangeAndRereadsTheSameBytes) {
  const int64_t page = static_cast<int64_t>(MappedFile::page_size());
  read_all_and_check();
  const int64_t full = resident();
  ASSERT_GE(full, static_cast<int64_t>(kSize) / page * page);

  // [1 MiB + 100, 5 MiB + 100): the pages from 1 MiB + 1 page to 5 MiB.
  const uint64_t released_to = file_->release((1u << 20) + 100, 4u << 20);
  EXPECT_EQ(released_to, 5u << 20);
  // At least those pages left; maybe more: a file mapped with huge pages
  // (large folios) loses each huge page the range touches, to be faulted in
  // again like the rest.
  EXPECT_LE(resident(), full - ((4 << 20) - page));

  read_all_and_check();  // faulted in again from the file, unchanged
  EXPECT_EQ(resident(), full);
}

TEST_F(MappedFileRelease, TheLastPartialPageGoesWithARangeToTheEnd) {
  read_all_and_check();
  const int64_t full = resident();
  const uint64_t last_page = kSize / MappedFile::page_size() * MappedFile::page_size();
  EXPECT_EQ(file_->release(last_page, kSize - last_page), kSize);
  EXPECT_LE(resident(), full - static_cast<int64_t>(MappedFile::page_size()));
  EXPECT_EQ(file_->release(0, kSize), kSize);
  EXPECT_EQ(resident(), 0);
  read_all_and_check();
}

TEST_F(MappedFileRelease, ARangeInsideOnePageReleasesNothing) {
  read_all_and_check();
  const int64_t full = resident();
  const uint64_t page = MappedFile::page_size();
  EXPECT_EQ(file_->release(page + 10, 100), page + 10);  // returns where it started
  EXPECT_EQ(file_->release(kSize - 50, 50), kSize);      // keeps the last page's first bytes
  EXPECT_EQ(file_->release(kSize + 10, 100), kSize);     // past the end: clamped
  EXPECT_EQ(resident(), full);
}

TEST_F(MappedFileRelease, PrefetchMapsNothingAndChangesNothing) {
  file_->release(0, kSize);
  file_->prefetch(100, 3u << 20);
  file_->prefetch(kSize - 10, 1000);  // past the end: clamped
  EXPECT_EQ(resident(), 0);  // readahead fills the page cache, not this process's pages
  read_all_and_check();
}

}  // namespace
}  // namespace m2
