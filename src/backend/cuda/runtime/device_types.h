// The device-memory views every kernel family takes: weights, the experts
// of a layer, an activation's FP8 copy. Plain C++ (no device code). The
// families' launchers (<family>/*.h) return the launch's cudaError_t for the
// caller to check with context; activations are fp32, row-major; pointers are
// device pointers unless named `host`.
#pragma once

#include <cstdint>

#include "tensor/dtype.h"

namespace m2::cuda {

// FP8 weights carry one fp32 scale per kFp8Block x kFp8Block block.
constexpr int kFp8Block = 128;

// A weight matrix [rows, cols] in device memory in its stored dtype. FP8
// weights carry fp32 128 x 128 block scales [ceil(rows/128), scale_ld]:
// W = W8 x scales[r / 128, c / 128].
struct DeviceWeight {
  const uint8_t* data = nullptr;
  const float* scales = nullptr;
  DType dtype = DType::kF32;
  int64_t rows = 0;
  int64_t cols = 0;
  int64_t scale_ld = 0;
};

// The experts of one MoE layer, stacked: expert e's w1 (gate, [I, H]) starts
// at w1 + e * stride13 bytes and, for FP8, its scales at scale_off13 bytes
// further; w3 (up, [I, H]) likewise; w2 (down, [H, I]) with stride2 and
// scale_off2.
struct DeviceExperts {
  DType dtype = DType::kF8E4M3;
  int64_t num_experts = 0;    // stacked here
  int64_t first_expert = 0;   // the router's id of stacked expert 0 (expert parallelism: the rank's first)
  int64_t router_experts = 0; // the router's E (> num_experts: other ranks hold the rest)
  int64_t hidden = 0;        // H
  int64_t intermediate = 0;  // I
  const uint8_t* w1 = nullptr;
  const uint8_t* w3 = nullptr;
  const uint8_t* w2 = nullptr;
  int64_t stride13 = 0, scale_off13 = 0;
  int64_t stride2 = 0, scale_off2 = 0;
};

// What the CUDA backend's prepare_weights made of a weight (Weight::prepared,
// Linear::prepared point at one; `owner` is the backend whose ops may read it).
struct PreparedTensor {
  const void* owner = nullptr;
  DeviceWeight weight;                // vectors: data and dtype, rows = elements, cols = 1
  const DeviceWeight* qkv = nullptr;  // a q_proj whose layer's q, k and v are stacked: the stack
};
// ... and of a layer's experts (LayerWeights::prepared_experts); `host`: the
// layer's experts live in pinned host memory (moe/host_experts.h) and
// `experts` addresses that host copy.
struct HostExperts;
struct PreparedExperts {
  const void* owner = nullptr;
  DeviceExperts experts;
  const HostExperts* host = nullptr;
};

// An optional FP8 copy of an fp32 activation [T, K] that its producer kernel
// writes beside it (null q: none): codes q [T, K] e4m3 and scales
// s [K / 128, T] (s[kb * T + t]), exactly what launch_quantize_fp8
// (fp8_gemm.h) writes from the fp32 output, so that the FP8 products reading
// the activation skip that kernel. K a multiple of 128, q 4-byte aligned.
struct Fp8Out {
  uint8_t* q = nullptr;
  float* s = nullptr;
};

}  // namespace m2::cuda
