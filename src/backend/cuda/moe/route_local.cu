// Expert parallelism (--enable-expert-parallel): a rank holds experts
// [first, first + count) of the router's E, stacked from 0. Its MoE reads the
// routing rewritten to those local indices: a pair whose expert another rank
// holds points at local expert 0 with weight 0 (it adds exactly 0 to the
// token's sum: its owner adds the real term, the all-reduce joins them), so
// every MoE kernel runs unchanged. The cost: those pairs still pass through
// local expert 0 (one extra expert's weights per step at decode; up to
// (tp-1)/tp of the pairs' arithmetic in a grouped prefill step).
#include "backend/cuda/moe/route.h"

namespace m2::cuda {
namespace {

__global__ void route_local_kernel(const int32_t* ids, const float* weights, int64_t n, int32_t first, int32_t count,
                                   int32_t* local_ids, float* local_weights) {
  const int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (i >= n) return;
  const int32_t e = ids[i] - first;
  const bool mine = e >= 0 && e < count;
  local_ids[i] = mine ? e : 0;
  local_weights[i] = mine ? weights[i] : 0.0f;
}

}  // namespace

cudaError_t launch_route_local(const int32_t* ids, const float* weights, int64_t n, int first, int count,
                               int32_t* local_ids, float* local_weights, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  if (!ids || !weights || !local_ids || !local_weights || count < 1) return cudaErrorInvalidValue;
  constexpr int kThreads = 256;
  route_local_kernel<<<static_cast<unsigned>((n + kThreads - 1) / kThreads), kThreads, 0, stream>>>(
      ids, weights, n, first, count, local_ids, local_weights);
  return cudaGetLastError();
}

}  // namespace m2::cuda
