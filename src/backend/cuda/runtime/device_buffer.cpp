#include "backend/cuda/runtime/device_buffer.h"

#include <algorithm>
#include <atomic>
#include <cstring>

#include "backend/cuda/runtime/check.h"
#include "util/log.h"

namespace m2::cuda {
namespace {
std::atomic<uint64_t> g_generation{0};
std::atomic<int64_t> g_growths_past_reserve{0};
}  // namespace

int64_t scratch_growths_past_reserve() { return g_growths_past_reserve.load(); }

uint64_t memory_generation() { return g_generation.load(); }
void bump_memory_generation() { g_generation.fetch_add(1); }

DeviceBuffer::~DeviceBuffer() {
  if (data_) cudaFree(data_);  // at exit the context may be gone: nothing to report
}

void* DeviceBuffer::reserve(size_t bytes, cudaStream_t stream, bool zero) {
  if (bytes <= size_ && data_) return data_;
  if (data_) {
    M2_CUDA_CHECK(cudaStreamSynchronize(stream), "scratch growth to {} bytes", bytes);
    M2_CUDA_CHECK(cudaFree(data_), "scratch growth to {} bytes", bytes);
    data_ = nullptr;
  }
  if (planned_) {
    g_growths_past_reserve.fetch_add(1);
    if (!warned_)
      log_warn("CUDA scratch '{}' grew past its up-front size ({} -> {} bytes): the step was larger than the limits "
               "it was sized for, or scratch_plan undersized it",
               name_, size_, bytes);
    warned_ = true;
  }
  if (in_graphs_) bump_memory_generation();
  const size_t grown = std::max(bytes, size_ + size_ / 2);  // amortise growth
  M2_CUDA_CHECK(cudaMalloc(&data_, std::max<size_t>(grown, 256)), "cudaMalloc of {} bytes of scratch", grown);
  size_ = std::max<size_t>(grown, 256);
  if (zero) M2_CUDA_CHECK(cudaMemsetAsync(data_, 0, size_, stream), "zeroing {} bytes of scratch", size_);
  return data_;
}

void DeviceBuffer::reserve_up_front(size_t bytes, cudaStream_t stream, bool zero) {
  if (bytes > size_) {
    planned_ = false;  // this growth is the plan's
    reserve(bytes, stream, zero);
  }
  planned_ = true;
}

bool DeviceArray::holds(const void* host, size_t bytes) const {
  return last_device_ && last_.size() == bytes && (bytes == 0 || std::memcmp(last_.data(), host, bytes) == 0);
}

const void* DeviceArray::upload(const void* host, size_t bytes, cudaStream_t stream) {
  const bool same = holds(host, bytes);
  void* dev = buffer_.reserve(bytes, stream);
  if (same && dev == last_device_) return dev;
  last_.assign(static_cast<const uint8_t*>(host), static_cast<const uint8_t*>(host) + bytes);
  // From our own copy: a pageable source is staged before the call returns,
  // and the copy runs in stream order after the kernels still reading `dev`.
  if (bytes > 0)
    M2_CUDA_CHECK(cudaMemcpyAsync(dev, last_.data(), bytes, cudaMemcpyHostToDevice, stream),
                  "upload of a {}-byte host array", bytes);
  last_device_ = dev;
  return dev;
}

}  // namespace m2::cuda
