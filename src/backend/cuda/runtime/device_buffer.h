// Device memory the CUDA backend manages for itself: growable scratch, and
// small host arrays (token ids, positions, KV slots, block tables) mirrored on
// the device.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <vector>

namespace m2::cuda {

// Bumped whenever device memory the backend hands to kernels moves (a
// scratch buffer grows, an allocation is made): recorded step graphs hold raw
// addresses and are valid only for the generation they were captured in.
uint64_t memory_generation();
void bump_memory_generation();

// Bytes rounded up to 256 (the alignment of every region we lay out).
inline size_t align256(size_t bytes) { return (bytes + 255) / 256 * 256; }

// Consecutive regions of one scratch allocation, each at a 256-byte
// boundary. With a null base it only sizes them (take returns null).
class ScratchLayout {
 public:
  explicit ScratchLayout(void* base) : base_(static_cast<uint8_t*>(base)) {}
  uint8_t* take(size_t bytes) {
    uint8_t* p = base_ ? base_ + size_ : nullptr;
    size_ += align256(bytes);
    return p;
  }
  size_t size() const { return size_; }

 private:
  uint8_t* base_;
  size_t size_ = 0;
};

// Growths of buffers past their up-front size (DeviceBuffer::reserve_up_front)
// in this process: each one is a sizing bug in scratch_plan (tests check 0).
int64_t scratch_growths_past_reserve();

// Scratch that grows on demand; contents are not kept across a growth.
class DeviceBuffer {
 public:
  // `name`: for the log. `in_graphs` false: no recorded step graph reads the
  // buffer (the sampler's), so its growth keeps the graphs.
  explicit DeviceBuffer(const char* name = "scratch", bool in_graphs = true) : name_(name), in_graphs_(in_graphs) {}
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer();

  // At least `bytes` bytes (stream-ordered: work queued on `stream` that uses
  // the old memory finishes before it is freed). New memory is zeroed when
  // `zero` is set.
  void* reserve(size_t bytes, cudaStream_t stream, bool zero = false);
  // The size planned for the largest step (Backend::reserve_scratch): a
  // later growth past it is logged once and counted.
  void reserve_up_front(size_t bytes, cudaStream_t stream, bool zero = false);
  size_t size() const { return size_; }

 private:
  const char* name_;
  bool in_graphs_;
  bool planned_ = false;  // sized by reserve_up_front
  bool warned_ = false;
  void* data_ = nullptr;
  size_t size_ = 0;
};

// A device copy of a small host array, uploaded again only when its bytes
// change: each layer of a step passes the same positions, slots and block
// tables, so a step uploads them once.
class DeviceArray {
 public:
  explicit DeviceArray(const char* name = "host array", bool in_graphs = true) : buffer_(name, in_graphs) {}
  const void* upload(const void* host, size_t bytes, cudaStream_t stream);
  // Room for `bytes` without moving (so that later uploads keep the address).
  void reserve(size_t bytes, cudaStream_t stream) { buffer_.reserve(bytes, stream); }
  void reserve_up_front(size_t bytes, cudaStream_t stream) { buffer_.reserve_up_front(bytes, stream); }
  // Whether `host` holds the bytes last uploaded (upload would copy nothing).
  bool holds(const void* host, size_t bytes) const;

  template <class T>
  const T* upload(const std::vector<T>& v, cudaStream_t stream) {
    return static_cast<const T*>(upload(v.data(), v.size() * sizeof(T), stream));
  }

 private:
  std::vector<uint8_t> last_;          // bytes last uploaded
  const void* last_device_ = nullptr;  // where they went
  DeviceBuffer buffer_;
};

}  // namespace m2::cuda
