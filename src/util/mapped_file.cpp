#include "util/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace m2 {

Result<std::unique_ptr<MappedFile>> MappedFile::open(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return errorf("{}: cannot open: {}", path, std::strerror(errno));
  struct stat st {};
  if (fstat(fd, &st) != 0) {
    int e = errno;
    ::close(fd);
    return errorf("{}: cannot stat: {}", path, std::strerror(e));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return errorf("{}: not a regular file", path);
  }
  std::unique_ptr<MappedFile> f(new MappedFile());
  f->path_ = path;
  f->size_ = static_cast<size_t>(st.st_size);
  if (f->size_ > 0) {
    void* p = mmap(nullptr, f->size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      int e = errno;
      ::close(fd);
      return errorf("{}: mmap of {} bytes failed: {}", path, f->size_, std::strerror(e));
    }
    f->data_ = static_cast<const uint8_t*>(p);
  }
  ::close(fd);
  return f;
}

MappedFile::~MappedFile() {
  if (data_) munmap(const_cast<uint8_t*>(data_), size_);
}

uint64_t MappedFile::page_size() {
  static const uint64_t page = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  return page;
}

void MappedFile::prefetch(uint64_t offset, uint64_t n) const {
  if (!data_ || offset >= size_) return;
  const uint64_t begin = offset / page_size() * page_size();
  const uint64_t end = std::min<uint64_t>(size_, offset + std::min<uint64_t>(n, size_ - offset));
  if (end > begin) madvise(const_cast<uint8_t*>(data_) + begin, end - begin, MADV_WILLNEED);
}

uint64_t MappedFile::release(uint64_t offset, uint64_t n) const {
  const uint64_t page = page_size();
  offset = std::min<uint64_t>(offset, size_);
  uint64_t end = offset + std::min<uint64_t>(n, size_ - offset);
  if (end < size_) end = end / page * page;  // a page that goes on past the range is kept
  const uint64_t begin = (offset + page - 1) / page * page;
  // The mapping starts on a page, so begin is an aligned address; madvise
  // rounds a length that stops at the file's end up to its last page.
  if (data_ && end > begin) madvise(const_cast<uint8_t*>(data_) + begin, end - begin, MADV_DONTNEED);
  return std::max(end, offset);
}

Result<std::shared_ptr<void>> reserve_inaccessible(size_t bytes) {
  const size_t n = std::max<size_t>(bytes, 1);
  void* p = mmap(nullptr, n, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) return errorf("reserving {} bytes of address space failed: {}", n, std::strerror(errno));
  return std::shared_ptr<void>(p, [n](void* q) { munmap(q, n); });
}

}  // namespace m2
