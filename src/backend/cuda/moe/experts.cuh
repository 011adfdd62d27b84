// Device views of one MoE layer's experts (DeviceExperts, runtime/device_types.h) and the
// SwiGLU activation, shared by the MoE kernels.
#pragma once

#include "backend/cuda/runtime/common.cuh"
#include "backend/cuda/runtime/device_types.h"

namespace m2::cuda {

// Expert e's matrices.
__device__ inline DeviceWeight expert_w13(const DeviceExperts& x, const uint8_t* base, int64_t e) {
  const uint8_t* p = base + e * x.stride13;
  return DeviceWeight{p, reinterpret_cast<const float*>(p + x.scale_off13), x.dtype, x.intermediate, x.hidden,
                      ceil_div(x.hidden, kScaleBlock)};
}
__device__ inline DeviceWeight expert_w2(const DeviceExperts& x, int64_t e) {
  const uint8_t* p = x.w2 + e * x.stride2;
  return DeviceWeight{p, reinterpret_cast<const float*>(p + x.scale_off2), x.dtype, x.hidden, x.intermediate,
                      ceil_div(x.intermediate, kScaleBlock)};
}

__device__ inline float silu_mul(float g, float up) { return g / (1.0f + expf(-g)) * up; }

}  // namespace m2::cuda
