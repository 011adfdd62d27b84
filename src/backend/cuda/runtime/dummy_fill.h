// Launcher of dummy_fill.cu: --load-format dummy's FP8 weights on the GPU.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "model/dummy_values.h"
#include "backend/cuda/runtime/device_types.h"

namespace m2::cuda {

// ---- dummy_fill.cu: --load-format dummy's FP8 weights generated on the GPU
// (model/dummy_values.h): elements [first, first + n) of the tensor with
// `seed`, element `first` at dst; the host fill's exact bytes.
cudaError_t launch_fill_dummy_fp8(uint8_t* dst, int64_t first, int64_t n, uint64_t seed, const DummyFp8Table& table,
                                  cudaStream_t stream);

}  // namespace m2::cuda
