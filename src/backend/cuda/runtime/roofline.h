// Launchers of roofline.cu: the ceilings benchmarks compare with.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "backend/cuda/runtime/device_types.h"

namespace m2::cuda {

// ---- roofline.cu --------------------------------------------------------------
// Device-to-device copy bandwidth in bytes/s (bytes read + bytes written) of
// a buffer much larger than L2.
cudaError_t measure_copy_bandwidth(size_t bytes, double* bytes_per_second);
// Keeps `stream` busy for `seconds` (benchmarks queue the launches they time
// behind it, so that host launch overhead stays out of the GPU's timeline).
cudaError_t launch_gpu_delay(cudaStream_t stream, double seconds);
// cuBLASLt dense GEMM throughput (FLOP/s) at 8192^3 with BF16 or F8_E4M3
// inputs, fp32 accumulation.
cudaError_t measure_gemm_flops(DType input, double* flops);

}  // namespace m2::cuda
