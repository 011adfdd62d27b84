// Per-token-group activation quantisation to e4m3 (fp8_gemm.h): one fp32
// scale per row per 128 columns, scale = amax / 448, codes e4m3(v / scale)
// with RNE, saturating. Device functions only, shared by the stand-alone
// quantisation kernel (fp8_gemm.cu) and the kernels that quantise what they
// produce (RMSNorm, prefill attention, the MoE's SwiGLU epilogues), so that
// every writer gives the same bytes for the same fp32 values.
#pragma once

#include <cuda_fp8.h>

#include "backend/cuda/runtime/common.cuh"

namespace m2::cuda {

constexpr float kE4m3MaxValue = 448.0f;  // largest finite e4m3

// The scale of a group whose largest magnitude is `amax` (0 for an all-zero group).
__device__ inline float fp8_group_scale(float amax) { return amax / kE4m3MaxValue; }

// Code of v in a group whose scale is `scale` = fp8_group_scale(amax) (RNE,
// saturating; an all-zero group has scale 0 and codes 0).
__device__ inline uint8_t fp8_code(float v, float scale) {
  return __nv_cvt_float_to_fp8(scale > 0.0f ? v / scale : 0.0f, __NV_SATFINITE, __NV_E4M3);
}

// One warp quantises one group of 128 values, lane l holding values
// 4l..4l+3 in v: returns the lane's 4 codes (value 4l in the low byte) and
// sets *scale (every lane) to the group's scale. (fmaxf skips NaN; the max is
// exact, so the order of the reduction does not matter.)
__device__ inline uint32_t quantize_group128(float4 v, float* scale) {
  const float amax = warp_max(fmaxf(fmaxf(fabsf(v.x), fabsf(v.y)), fmaxf(fabsf(v.z), fabsf(v.w))));
  const float s = fp8_group_scale(amax);
  *scale = s;
  return static_cast<uint32_t>(fp8_code(v.x, s)) | static_cast<uint32_t>(fp8_code(v.y, s)) << 8 |
         static_cast<uint32_t>(fp8_code(v.z, s)) << 16 | static_cast<uint32_t>(fp8_code(v.w, s)) << 24;
}

// quantize_group128 of group kb (columns [128 kb, 128 kb + 128)) of row t of
// an activation [T, K], stored in launch_quantize_fp8's layout: codes q[t, :]
// (row stride K bytes), scale s[kb * T + t]. Called by all 32 lanes of a warp,
// lane l holding columns 128 kb + 4l..+3; q 4-byte aligned.
__device__ inline void quantize_store_group128(float4 v, int64_t t, int64_t kb, int64_t T, int64_t K, uint8_t* q,
                                               float* s) {
  float scale = 0.0f;
  const uint32_t codes = quantize_group128(v, &scale);
  const int lane = threadIdx.x % kWarp;
  *reinterpret_cast<uint32_t*>(q + t * K + kb * kFp8Block + 4 * lane) = codes;
  if (lane == 0) s[kb * T + t] = scale;
}

}  // namespace m2::cuda
