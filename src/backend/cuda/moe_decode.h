// The decode MoE's kernels (moe_decode.cu); moe.cu's launch_moe calls them
// for at most kMoeDecodePairs pairs.
#pragma once

#include <cuda_runtime.h>

#include "backend/cuda/kernels.h"

namespace m2::cuda {

// out = the MoE of a.x as launch_moe defines it; u: scratch [pairs, I]
// floats (the SwiGLU outputs). FP8 or BF16 experts (launch_moe checks them).
cudaError_t launch_moe_decode(const MoeArgs& a, float* u, cudaStream_t stream);

}  // namespace m2::cuda
