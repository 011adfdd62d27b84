// Routing replay (Backend::route_forced): tokens whose experts are given
// take them, weighted by their unbiased sigmoid scores renormalised over the
// given set, times the scaling (as the CPU backend and the router's own
// selection, route.cu: each sigmoid in double rounded to float, their sum in
// double in the given order). One thread per token; top_k <= 16.
#include "backend/cuda/moe/route.h"

namespace m2::cuda {
namespace {

constexpr int kMaxForcedTopK = 16;

__global__ void route_forced_kernel(const float* logits, int64_t T, int64_t E, const int32_t* forced, int top_k,
                                    float scaling, int32_t* expert_ids, float* weights) {
  const int64_t t = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (t >= T) return;
  const int32_t* ids = forced + t * top_k;
  if (ids[0] < 0) return;  // routed by the router (route() wrote it)
  float score[kMaxForcedTopK];
  double sum = 0;
  for (int j = 0; j < top_k; ++j) {
    score[j] = static_cast<float>(1.0 / (1.0 + exp(-static_cast<double>(logits[t * E + ids[j]]))));
    sum += score[j];
  }
  for (int j = 0; j < top_k; ++j) {
    expert_ids[t * top_k + j] = ids[j];
    weights[t * top_k + j] = static_cast<float>(score[j] / sum * scaling);
  }
}

}  // namespace

cudaError_t launch_route_forced(const float* logits, int64_t T, int64_t E, const int32_t* forced, int top_k,
                                float scaling, int32_t* expert_ids, float* weights, cudaStream_t stream) {
  if (T <= 0) return cudaSuccess;
  if (top_k < 1 || top_k > kMaxForcedTopK || !logits || !forced) return cudaErrorInvalidValue;
  constexpr int kThreads = 128;
  route_forced_kernel<<<static_cast<unsigned>((T + kThreads - 1) / kThreads), kThreads, 0, stream>>>(
      logits, T, E, forced, top_k, scaling, expert_ids, weights);
  return cudaGetLastError();
}

}  // namespace m2::cuda
