// The sigmoid router in one kernel: fp32 gate GEMV (logits = x · gateᵀ),
// then, in the last block to finish each group of 4 tokens, sigmoid +
// correction bias for selection + top-k + renormalisation of the unbiased
// scores (spec §2.2h).
//
// The gate [E, H] is read once per group of 4 tokens by many blocks (the
// GEMV core, gemv.cuh); each block then bumps a per-group counter and the
// last one selects, one warp per token. Selection matches the CPU backend:
// scores and the weight sum in fp64, ties to the lower expert id.
#include <cfloat>
#include <climits>

#include "backend/cuda/gemv.cuh"

namespace m2::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / kWarp;
constexpr int kTokens = 4;   // tokens per gate pass (and per selection group)
constexpr int kRows = 2;     // gate rows per warp group
constexpr int kMaxExpertsPerLane = 16;  // E <= 512
constexpr int kMaxTopK = 16;

// Top-k of one token by a warp. logits: the token's [E] row, written by other
// blocks of this launch (read through L2).
__device__ void select_experts(const float* logits, const RouteArgs& a, int64_t E, int64_t t) {
  const int lane = threadIdx.x % kWarp;
  float score[kMaxExpertsPerLane], biased[kMaxExpertsPerLane];
#pragma unroll
  for (int i = 0; i < kMaxExpertsPerLane; ++i) {
    const int64_t e = lane + kWarp * i;
    score[i] = 0.0f, biased[i] = -FLT_MAX;
    if (e < E) {
      const double lg = __ldcg(logits + e);
      score[i] = static_cast<float>(1.0 / (1.0 + exp(-lg)));
      biased[i] = __fadd_rn(score[i], a.bias ? load_any(a.bias, a.bias_dtype, e) : 0.0f);  // selection only
    }
  }
  uint32_t taken = 0;  // bit i: expert lane + 32 i already chosen
  float chosen[kMaxTopK];
  int32_t chosen_id[kMaxTopK];
#pragma unroll
  for (int j = 0; j < kMaxTopK; ++j) {
    if (j >= a.top_k) break;
    // This lane's best, then the warp's: larger biased score, then lower id.
    float best = -FLT_MAX, best_score = 0.0f;
    int best_id = INT_MAX;
#pragma unroll
    for (int i = 0; i < kMaxExpertsPerLane; ++i) {
      const int id = lane + kWarp * i;
      if (id < E && !(taken >> i & 1u) && (biased[i] > best || (biased[i] == best && id < best_id)))
        best = biased[i], best_score = score[i], best_id = id;
    }
#pragma unroll
    for (int o = kWarp / 2; o > 0; o /= 2) {
      const float ob = __shfl_xor_sync(0xffffffffu, best, o);
      const int oid = __shfl_xor_sync(0xffffffffu, best_id, o);
      if (ob > best || (ob == best && oid < best_id)) best = ob, best_id = oid;
    }
    chosen_id[j] = best_id;
    chosen[j] = __shfl_sync(0xffffffffu, best_score, best_id % kWarp);
    if (lane == best_id % kWarp) taken |= 1u << (best_id / kWarp);
  }
  if (lane != 0) return;
  double sum = 0;
#pragma unroll
  for (int j = 0; j < kMaxTopK; ++j)
    if (j < a.top_k) sum += chosen[j];
#pragma unroll
  for (int j = 0; j < kMaxTopK; ++j) {
    if (j >= a.top_k) break;
    a.expert_ids[t * a.top_k + j] = chosen_id[j];
    a.weights[t * a.top_k + j] = static_cast<float>(chosen[j] / sum * static_cast<double>(a.scaling));
  }
}

template <DType WT>
__global__ void __launch_bounds__(kThreads) route_kernel(RouteArgs a, int G) {
  extern __shared__ float4 xs[];
  __shared__ float red[kWarps][kRows][kTokens];
  __shared__ bool last;
  const DeviceWeight& w = a.gate;
  const int64_t E = w.rows, H = w.cols;
  const int64_t t0 = static_cast<int64_t>(blockIdx.y) * kTokens;
  const int T = a.T - t0 < kTokens ? static_cast<int>(a.T - t0) : kTokens;
  const XLayout lay = make_layout<WT>(H, kWarp * G);
  stage_rows<WT>(xs, lay, T, H, [&](int t) { return a.x + (t0 + t) * H; });
  __syncthreads();

  // Logits of this block's gate rows for the group's tokens.
  const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
  const int64_t n = static_cast<int64_t>(blockIdx.x) * (kWarps / G) * kRows + (warp / G) * kRows;
  float acc[kRows][kTokens] = {};
  dot_rows<WT, kTokens, kRows>(w, n, xs, lay, (warp % G) * kWarp + lane, T, acc);
#pragma unroll
  for (int r = 0; r < kRows; ++r)
#pragma unroll
    for (int t = 0; t < kTokens; ++t) acc[r][t] = warp_sum(acc[r][t]);
  if (lane == 0) {
#pragma unroll
    for (int r = 0; r < kRows; ++r)
#pragma unroll
      for (int t = 0; t < kTokens; ++t) red[warp][r][t] = acc[r][t];
  }
  __syncthreads();
  if (warp % G == 0) {
#pragma unroll
    for (int r = 0; r < kRows; ++r)
#pragma unroll
      for (int t = 0; t < kTokens; ++t) {
        float s = red[warp][r][t];
        for (int g = 1; g < G; ++g) s += red[warp + g][r][t];
        if (lane == r * kTokens + t && t < T && n + r < E) a.logits[(t0 + t) * E + n + r] = s;
      }
  }

  // The last block of the group to finish selects the experts.
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0) last = atomicAdd(&a.counters[blockIdx.y], 1u) == gridDim.x - 1;
  __syncthreads();
  if (!last) return;
  __threadfence();
  if (warp < T) select_experts(a.logits + (t0 + warp) * E, a, E, t0 + warp);
  if (threadIdx.x == 0) a.counters[blockIdx.y] = 0;  // ready for the next launch
}

template <DType WT>
cudaError_t launch_typed(const RouteArgs& a, int num_sms, cudaStream_t stream) {
  const int64_t E = a.gate.rows;
  int G = 1;  // warps per gate row: enough blocks to stream the gate at full speed
  while (G < kWarps && ceil_div(E, (kWarps / G) * kRows) < num_sms) G *= 2;
  const size_t smem = staged_row_float4<WT>(a.gate.cols, kWarp * G) * kTokens * sizeof(float4);
  cudaError_t e = allow_dynamic_smem(route_kernel<WT>, smem);
  if (e != cudaSuccess) return e;
  const dim3 grid(static_cast<unsigned>(ceil_div(E, (kWarps / G) * kRows)),
                  static_cast<unsigned>(ceil_div(a.T, kTokens)));
  route_kernel<WT><<<grid, kThreads, smem, stream>>>(a, G);
  return cudaGetLastError();
}

}  // namespace

int64_t route_counter_count(int64_t T) { return ceil_div(T, kTokens); }

cudaError_t launch_route(const RouteArgs& a, int num_sms, cudaStream_t stream) {
  if (a.gate.rows > kWarp * kMaxExpertsPerLane || a.top_k > kMaxTopK || a.top_k > a.gate.rows ||
      !gemv_compatible(a.gate))
    return cudaErrorInvalidValue;
  switch (a.gate.dtype) {
    case DType::kF32: return launch_typed<DType::kF32>(a, num_sms, stream);
    case DType::kBF16: return launch_typed<DType::kBF16>(a, num_sms, stream);
    default: return cudaErrorInvalidValue;
  }
}

}  // namespace m2::cuda
