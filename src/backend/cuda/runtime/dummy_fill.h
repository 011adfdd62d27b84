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
// `seed`, element `first` at dst; the host fill's exact bytes. With
// `cols` > 0 the tensor is columns [col_begin, col_begin + cols) of one of
// `full_cols` columns (ModelWeights::DummyFp8): its element k is the full
// tensor's element (k / cols) * full_cols + col_begin + k % cols.
cudaError_t launch_fill_dummy_fp8(uint8_t* dst, int64_t first, int64_t n, uint64_t seed, const DummyFp8Table& table,
                                  cudaStream_t stream, int64_t full_cols = 0, int64_t col_begin = 0, int64_t cols = 0);

}  // namespace m2::cuda
