// Launchers of moe.cu: the routed SwiGLU experts of a layer.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "backend/cuda/runtime/device_types.h"

namespace m2::cuda {

// ---- moe.cu -------------------------------------------------------------------
// Up to this many (token, expert) pairs launch_moe takes the decode path (no
// grouping: each pair's expert weights streamed by its own blocks,
// moe_decode.cu).
constexpr int64_t kMoeDecodePairs = 64;
// Experts per token launch_moe takes.
constexpr int kMoeMaxTopK = 16;

struct MoeArgs {
  const float* x = nullptr;  // [T, H]
  int64_t T = 0;
  DeviceExperts experts;
  const int32_t* expert_ids = nullptr;  // [T, top_k]
  const float* weights = nullptr;       // [T, top_k]
  int top_k = 0;
  float* out = nullptr;  // [T, H]
  // Scratch from moe_scratch_bytes(): activations of the experts and, for
  // more than a few tokens, the grouping of (token, slot) pairs by expert.
  void* scratch = nullptr;
  // Grouped path of FP8 experts with dimensions in multiples of 128 on
  // tensor cores with FP8 activations (moe_fp8.cu); false: fp32 SIMT tiles.
  bool fp8_tensor_cores = true;
  // With fp8_tensor_cores: that grouped path's GEMMs on CUTLASS instead
  // (moe_cutlass.h; builds with M2CPP_WITH_CUTLASS, sm_90 devices only:
  // device_caps.h). The scratch must be sized with the same flag.
  bool use_cutlass = false;
  int num_sms = 0;  // of the device (CUTLASS's persistent grid, the decode path's grid; 0: asked of the device)
  // Decode (at most kMoeDecodePairs pairs) of FP8 experts with dimensions in
  // multiples of 128: W2 on tensor cores (wgmma, moe_decode_wgmma.cu; sm_90a
  // code on an sm_90 device: CudaFeatures::wgmma) instead of the SIMT
  // streaming kernel, same accuracy. Needs `counters`:
  // moe_decode_counter_count() zeros, which the kernel leaves zero.
  bool wgmma_decode = false;
  unsigned* counters = nullptr;
  // The grouped path even at <= kMoeDecodePairs pairs (the plan's choice
  // under batch invariance: moe_plan.h).
  bool always_grouped = false;
  // x's FP8 copy written by its producer (Fp8Out's layout: codes [T, H],
  // scales [H / 128, T]), or null: the FP8 paths quantise x into their
  // scratch themselves.
  const uint8_t* x8 = nullptr;
  const float* sx = nullptr;
};
size_t moe_scratch_bytes(int64_t T, int top_k, int64_t hidden, int64_t intermediate, int64_t num_experts,
                         bool cutlass);
int64_t moe_decode_counter_count(int64_t T, int64_t hidden);
// Whether launch_moe takes a grouped FP8 path (tensor cores: more than 64
// pairs, FP8 experts of dimensions in multiples of 128, fp8_tensor_cores),
// the paths that quantise x or read x8.
bool moe_reads_x8(const MoeArgs& a);
// For those paths: leaves a.x8, a.sx as they are when x's producer set them,
// else quantises x into (x8, sx) (launch_quantize_fp8) and points a at them.
cudaError_t moe_quantize_x(MoeArgs& a, uint8_t* x8, float* sx, cudaStream_t stream);
cudaError_t launch_moe(const MoeArgs& a, cudaStream_t stream);

}  // namespace m2::cuda
