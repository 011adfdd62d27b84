// Checking CUDA calls. The Backend ops return nothing, and a failed launch or
// a broken device leaves the context unusable anyway, so a failure inside an
// op stops the process with the op, its shapes and CUDA's message. Failures a
// caller can act on (a weight upload that does not fit) are returned as
// Status instead (cuda_weights.cpp).
//
// Kernels run asynchronously: an error inside a kernel is seen at the next
// synchronisation, usually copy_to_host. M2CPP_CUDA_OPTIONS=sync=on synchronises after
// every op so that the failing op is named.
#pragma once

#include <cuda_runtime.h>
#include <fmt/format.h>

#include <string>

namespace m2::cuda {

[[noreturn]] void die(cudaError_t error, const char* call, const std::string& context, const char* file, int line);

}  // namespace m2::cuda

// M2_CUDA_CHECK(cudaMalloc(...), "allocate {} bytes", n): the context is only
// formatted on failure.
#define M2_CUDA_CHECK(call, ...)                                                                   \
  do {                                                                                             \
    const cudaError_t m2_cuda_error_ = (call);                                                     \
    if (m2_cuda_error_ != cudaSuccess)                                                             \
      ::m2::cuda::die(m2_cuda_error_, #call, ::fmt::format(__VA_ARGS__), __FILE__, __LINE__);      \
  } while (0)
