// The MoE decode path for FP8 experts on tensor cores (moe_decode_mma.cu).
// Plain C++: launch_moe (moe.cu) calls it for few (token, expert) pairs.
#pragma once

#include <cuda_runtime.h>

#include "backend/cuda/kernels.h"

namespace m2::cuda {

// FP8 experts with H and I in multiples of 128, at most 8 tokens and 32
// pairs (the staged activations fit in shared memory), M2CPP_GEMV_MMA not off.
bool moe_decode_mma_fits(const MoeArgs& a);
// u: scratch [T * top_k, I] fp32 (the SwiGLU outputs between the two kernels).
cudaError_t launch_moe_decode_mma(const MoeArgs& a, float* u, cudaStream_t stream);

}  // namespace m2::cuda
