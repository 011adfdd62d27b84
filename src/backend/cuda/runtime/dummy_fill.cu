// --load-format dummy's FP8 weights generated on the GPU where they live
// (model/dummy_values.h gives every element as a function of its index), so
// that a benchmark at the real shape starts in seconds instead of filling
// and uploading ~100 GB from the host. Bytes identical to the host's fill.
#include <algorithm>

#include "backend/cuda/runtime/common.cuh"
#include "backend/cuda/runtime/dummy_fill.h"

namespace m2::cuda {
namespace {

constexpr int kThreads = 256;

// Thread g writes the elements of word w0 + g (elements [8 (w0 + g), +8))
// that lie in [first, first + n); dst is element `first`'s address.
__global__ void __launch_bounds__(kThreads) fill_dummy_fp8_kernel(uint8_t* dst, int64_t first, int64_t n,
                                                                  uint64_t seed, DummyFp8Table table) {
  __shared__ uint8_t code[256];  // a kernel parameter indexed per thread would serialise
  code[threadIdx.x] = table.code[threadIdx.x];
  __syncthreads();
  const int64_t end = first + n, w0 = first / 8;
  for (int64_t g = blockIdx.x * static_cast<int64_t>(kThreads) + threadIdx.x;; g += gridDim.x * static_cast<int64_t>(kThreads)) {
    const int64_t e0 = (w0 + g) * 8;
    if (e0 >= end) break;
    const int64_t chunk = e0 / kDummyChunk;
    const uint64_t r = dummy_fp8_word(seed, chunk, (e0 - chunk * kDummyChunk) / 8);
    uint64_t word = 0;
#pragma unroll
    for (int j = 0; j < 8; ++j) word |= static_cast<uint64_t>(code[(r >> (8 * j)) & 0xff]) << (8 * j);
    uint8_t* out = dst + (e0 - first);
    if (e0 >= first && e0 + 8 <= end && reinterpret_cast<uintptr_t>(out) % 8 == 0) {
      *reinterpret_cast<uint64_t*>(out) = word;
    } else {
      for (int j = 0; j < 8; ++j)
        if (e0 + j >= first && e0 + j < end) out[j] = static_cast<uint8_t>(word >> (8 * j));
    }
  }
}

// A column window of the tensor: one element per thread, each its own index
// into the full tensor (a shard's o_proj and w2 columns).
__global__ void __launch_bounds__(kThreads) fill_dummy_fp8_window_kernel(uint8_t* dst, int64_t first, int64_t n,
                                                                         uint64_t seed, DummyFp8Table table,
                                                                         int64_t full_cols, int64_t col_begin,
                                                                         int64_t cols) {
  __shared__ uint8_t code[256];
  code[threadIdx.x] = table.code[threadIdx.x];
  __syncthreads();
  for (int64_t g = blockIdx.x * static_cast<int64_t>(kThreads) + threadIdx.x; g < n;
       g += gridDim.x * static_cast<int64_t>(kThreads)) {
    const int64_t k = first + g, row = k / cols;
    dst[g] = code[dummy_fp8_index(seed, row * full_cols + col_begin + (k - row * cols))];
  }
}

}  // namespace

cudaError_t launch_fill_dummy_fp8(uint8_t* dst, int64_t first, int64_t n, uint64_t seed, const DummyFp8Table& table,
                                  cudaStream_t stream, int64_t full_cols, int64_t col_begin, int64_t cols) {
  if (n <= 0) return cudaSuccess;
  if (cols > 0) {
    const unsigned blocks = static_cast<unsigned>(std::min<int64_t>(ceil_div(n, kThreads), 8192));
    fill_dummy_fp8_window_kernel<<<blocks, kThreads, 0, stream>>>(dst, first, n, seed, table, full_cols, col_begin, cols);
    return cudaGetLastError();
  }
  const int64_t words = (first + n + 7) / 8 - first / 8;
  const unsigned blocks = static_cast<unsigned>(std::min<int64_t>(ceil_div(words, kThreads), 4096));
  fill_dummy_fp8_kernel<<<blocks, kThreads, 0, stream>>>(dst, first, n, seed, table);
  return cudaGetLastError();
}

}  // namespace m2::cuda
