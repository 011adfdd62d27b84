// The grouped FP8 MoE experts on CUTLASS's Hopper grouped GEMM with blockwise
// scaling (moe_cutlass.cu, sm_90a only; docs/design.md, "FP8 GEMM"). Plain
// C++: moe.cu and the backend call these; the CUTLASS headers stay in the .cu.
//
// Everything runs on the device from the routing in device memory (no host
// synchronisation, no host-side knowledge of the routing: the step is
// replayed from a CUDA graph). The CUTLASS GEMMs take all E experts as
// groups, each with its own M_e (pairs routed to it, 0 allowed: the group
// scheduler skips groups without tiles) read on the device.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "backend/cuda/moe/moe.h"

namespace m2::cuda {

// Whether this build has the CUTLASS path (CMake M2CPP_CUTLASS: defines
// M2CPP_WITH_CUTLASS and compiles moe_cutlass.cu for sm_90a).
#if defined(M2CPP_WITH_CUTLASS)
inline constexpr bool kCutlassMoeBuilt = true;
#else
inline constexpr bool kCutlassMoeBuilt = false;
#endif

// What launch_moe_cutlass takes from moe.cu: the pairs grouped by expert
// (launch_moe_group: sorted[] pair indices, with MoeCutlassScratch::first
// and ::row_of_pair written) and the regions of moe.cu's scratch it reuses:
//   x8 [T, H] e4m3 + sx [H / 128, T]  x quantised per token (moe_fp8_carve's x8, sx;
//                                     unused when MoeArgs::x8 is set);
//   a2 [P, I] e4m3 + sfa2 [P * I / 128] the SwiGLU output, rows in sorted
//                                     order, scales in per-expert blocks
//                                     (moe_fp8_carve's u8, su; layout below);
//   d1 [P, I] fp32                    the gate projection (moe.cu's u);
//   d2 [P, H] fp32                    the down projection, sorted rows (moe.cu's y).
struct MoeCutlassIo {
  const int32_t* sorted = nullptr;
  uint8_t* x8 = nullptr;
  float* sx = nullptr;
  uint8_t* a2 = nullptr;
  float* sfa2 = nullptr;
  float* d1 = nullptr;
  float* d2 = nullptr;
};

// From this many (token, expert) pairs the up GEMM runs on CUTLASS's
// cooperative kernel (128 x 128 tiles, clusters of 1 x 2), below on the
// pingpong kernel (64 x 128 tiles) that every other GEMM uses.
constexpr int64_t kMoeCutlassCooperativeMinPairs = 32768;

// The CUTLASS path's own scratch region. Rows of A1, A2, D1, D3 and D2 are
// in sorted order: expert e's M_e pairs at rows [first[e], first[e + 1]).
// CUTLASS 4.2's grouped blockwise mainloop rebuilds each group's scale
// layouts from (M_e, N, K), so a group's activation scales are one compact
// block [K / 128, M_e] (m fastest) at offset first[e] * K / 128:
// sfa[first[e] * K / 128 + kb * M_e + m].
struct MoeCutlassScratch {
  int32_t* first = nullptr;       // [E + 1]
  int32_t* row_of_pair = nullptr;  // [P]: sorted row of pair p = t * top_k + j
  uint8_t* a1 = nullptr;          // [P, H] e4m3: x rows gathered in sorted order
  float* sfa1 = nullptr;          // [P * H / 128], per-expert blocks
  float* d3 = nullptr;            // [P, I] fp32: the up projection
  // Per-group argument arrays of the GEMMs and CUTLASS's workspace
  // follow (moe_cutlass.cu).
};
size_t moe_cutlass_scratch_bytes(int64_t T, int top_k, int64_t hidden, int64_t intermediate, int64_t num_experts);
// launch_moe puts this region right after moe_fp8_carve's (tests read it).
MoeCutlassScratch moe_cutlass_carve(void* region, int64_t T, int top_k, int64_t hidden, int64_t intermediate,
                                    int64_t num_experts);

// out[t] = Σ_j w[t, j] · W2_e(silu(W1_e x_t) ⊙ W3_e x_t), e = ids[t, j], j in
// slot order: x quantised per token per 128 channels (launch_quantize_fp8,
// as moe_fp8.cu, or its producer's copy a.x8), rows gathered into sorted order, D1 = A1·W1ᵀ and D3 =
// A1·W3ᵀ (CUTLASS), u = silu(D1) ⊙ D3 quantised per row per 128 (the
// amax / 448 rule), D2 = A2·W2ᵀ (CUTLASS), then the weighted sum per token.
// Experts as moe_fp8_supported accepts; a.num_sms the device's SM count.
cudaError_t launch_moe_cutlass(const MoeArgs& a, const MoeCutlassIo& io, void* region, cudaStream_t stream);

}  // namespace m2::cuda
