// Read-only memory map of a whole file. Weights are used in place from the
// page cache (zero copy), so a checkpoint costs its own size in RAM at most;
// a consumer that copies them elsewhere (a GPU upload) reads ahead only what
// it is about to copy and releases what it has copied, so that it never
// holds more than a window of the file.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "util/status.h"

namespace m2 {

class MappedFile {
 public:
  static Result<std::unique_ptr<MappedFile>> open(const std::string& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }

  // Starts reading bytes [offset, offset + n) from the file in the
  // background (MADV_WILLNEED on the pages covering them). A hint: errors
  // are ignored, the data is read on first access anyway.
  void prefetch(uint64_t offset, uint64_t n) const;
  // Drops this process's pages that lie wholly inside [offset, offset + n)
  // (MADV_DONTNEED; the last page of the file counts as whole; where the
  // kernel maps the file with huge pages, each one the range touches): they
  // leave the resident set, and the page cache keeps them only as long as
  // the kernel wants. The mapping is read-only and private, so nothing is
  // lost: a later read faults the bytes in again from the file, and views
  // into the range stay valid. Returns where a caller releasing the file in
  // order continues: offset + n rounded down to a page (the file's size at
  // its end), or offset when that is less.
  uint64_t release(uint64_t offset, uint64_t n) const;

  // The granularity of prefetch and release.
  static uint64_t page_size();

 private:
  MappedFile() = default;
  std::string path_;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

// `bytes` of address space no access is allowed to (mmap PROT_NONE,
// nothing committed): unique addresses that stand for data kept elsewhere
// (dummy weights a GPU generates itself); a host read faults instead of
// reading garbage. Unmapped when the last owner goes.
Result<std::shared_ptr<void>> reserve_inaccessible(size_t bytes);

}  // namespace m2
