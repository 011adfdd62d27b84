// libFuzzer harness: a safetensors file as SafetensorsFile::open reads it
// (the 8-byte header length, the JSON header, the data area), from an
// in-memory file so that the real open path (mmap included) runs. Input:
// the file's bytes.
//
// Property: an accepted file's tensors lie inside the file, each as many
// bytes as its shape and dtype need (io/safetensors.h); every byte of every
// tensor can be read (ASan and the mapping's end catch one that cannot).
#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "fuzz_check.h"
#include "io/safetensors.h"
#include "tensor/dtype.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // memfd: a real file descriptor without touching the disk per input.
  const int fd = memfd_create("fuzz.safetensors", 0);
  FUZZ_CHECK(fd >= 0, "memfd_create failed");
  for (size_t done = 0; done < size;) {
    const ssize_t n = write(fd, data + done, size - done);
    FUZZ_CHECK(n > 0, "write to the memfd failed");
    done += static_cast<size_t>(n);
  }
  const std::string path = "/proc/self/fd/" + std::to_string(fd);
  auto file = m2::SafetensorsFile::open(path);
  if (file.ok()) {
    uint64_t total = 0;
    for (const auto& [name, e] : (*file)->entries()) {
      FUZZ_CHECK(e.offset >= 8 && e.offset <= size && e.nbytes <= size - e.offset,
                 "tensor '%s' at %llu + %llu bytes in a file of %zu", name.c_str(),
                 static_cast<unsigned long long>(e.offset), static_cast<unsigned long long>(e.nbytes), size);
      FUZZ_CHECK(e.nbytes == static_cast<uint64_t>(e.shape.numel()) * m2::dtype_size(e.dtype),
                 "tensor '%s': %llu bytes for its shape", name.c_str(), static_cast<unsigned long long>(e.nbytes));
      const m2::TensorView v = (*file)->view(e);
      uint8_t sum = 0;
      for (uint64_t i = 0; i < e.nbytes; ++i) sum ^= static_cast<const uint8_t*>(v.data)[i];
      (void)sum;
      total += e.nbytes;
    }
    FUZZ_CHECK(total <= size, "tensors of %llu bytes in a file of %zu", static_cast<unsigned long long>(total), size);
  }
  close(fd);
  return 0;
}
