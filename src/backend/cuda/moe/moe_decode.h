// The decode MoE's kernels (moe_decode.cu, moe_decode_wgmma.cu); moe.cu's
// launch_moe calls them for at most kMoeDecodePairs pairs.
#pragma once

#include <cuda_runtime.h>

#include "backend/cuda/moe/moe.h"

namespace m2::cuda {

// out = the MoE of a.x as launch_moe defines it; u: scratch [pairs, I]
// floats (the SwiGLU outputs), y: scratch [pairs, H] floats (each pair's W2
// product, with a.wgmma_decode). FP8 or BF16 experts (launch_moe checks
// them).
cudaError_t launch_moe_decode(const MoeArgs& a, float* u, float* y, cudaStream_t stream);

// The down pass on tensor cores (wgmma: sm_90a code on an sm_90 device):
// y[p, :] = W2_e u[p, :] for each pair p, then out[t, :] = Σ_j w[t, j]
// y[t k + j, :] in slot order. Needs moe_decode_wgmma_supported(a).
bool moe_decode_wgmma_supported(const MoeArgs& a);  // FP8 experts, dimensions in multiples of 128, counters
cudaError_t launch_moe_down_wgmma(const MoeArgs& a, const float* u, float* y, cudaStream_t stream);

}  // namespace m2::cuda
