#include "backend/cuda/runtime/check.h"

#include <cstdlib>

#include "util/log.h"

namespace m2::cuda {

void die(cudaError_t error, const char* call, const std::string& context, const char* file, int line) {
  log_error("CUDA error in {}: {} ({}): {} at {}:{}", context, cudaGetErrorString(error), cudaGetErrorName(error), call,
            file, line);
  std::abort();
}

}  // namespace m2::cuda
