// The sigmoid router in one kernel: fp32 gate GEMV (logits = x · gateᵀ),
// then, in the last block to finish each group of 4 tokens, sigmoid +
// correction bias for selection + top-k + renormalisation of the unbiased
// scores (spec §2.2h). Many tokens: the logits by a GEMM (route_gemm.h), then
// the selection alone (launch_route_select).
//
// The gate [E, H] is read once per group of 4 tokens by many blocks (the
// GEMV core, gemv.cuh); each block then bumps a per-group counter and the
// last one selects with all its threads. Selection matches the CPU backend:
// scores and the weight sum in fp64, ties to the lower expert id.
#include <cfloat>

#include "backend/cuda/gemm/gemv.cuh"
#include "backend/cuda/moe/route.h"

namespace m2::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / kWarp;
constexpr int kTokens = 4;   // tokens per gate pass (and per selection group)
constexpr int kRows = 2;     // gate rows per warp group
constexpr int kMaxExperts = 512;
constexpr int kMaxPerThread = kTokens * kMaxExperts / kThreads;  // (token, expert) pairs per thread
constexpr int kMaxTopK = 16;

// Top-k of the group's T tokens by the whole block (the last one to finish
// the gate product). One thread per (token, expert): sigmoid in fp64 and the
// biased score into shared memory. "x beats y": larger biased score, ties to
// the lower id. Then in two rounds of comparisons, all warps at once: each
// expert's rank among the (up to) 32 experts of its slice of the token's
// list, those of slice rank < top_k becoming candidates; then each
// candidate's rank among its token's candidates, which for the k winners is
// their rank among all E (every expert that beats a winner is a winner, and
// a winner is beaten by fewer than k experts of its slice, so every winner is
// a candidate), and is >= k for the rest. The k of rank < top_k are the
// selection, in the CPU backend's order. (One rank among all E per thread was
// E = 256 dependent shared-memory comparisons; this is 32 + 64 at the M2
// shapes. A single warp walking the k maxima one after another took 20-25 us
// of dependent latency on an H200.)
// logits: [T, E], written by other blocks of this launch (read through L2).
__device__ void select_experts(const float* logits, const RouteArgs& a, int64_t E, int64_t t0, int T) {
  constexpr int kSlice = kWarp, kMaxCand = kMaxExperts / kSlice * kMaxTopK;
  __shared__ float score[kTokens][kMaxExperts], biased[kTokens][kMaxExperts];
  __shared__ int32_t cand[kTokens][kMaxCand];
  __shared__ float chosen[kTokens][kMaxTopK];
  __shared__ int32_t chosen_id[kTokens][kMaxTopK];
  const int n = T * static_cast<int>(E), k = a.top_k;
  const int n_cand = static_cast<int>(ceil_div(E, kSlice)) * k;  // per token
  auto beats = [&](int t, int o, int e) {
    const float bo = biased[t][o], be = biased[t][e];
    return bo > be || (bo == be && o < e);
  };
  // Every load first, then the arithmetic (one round trip, not one per element).
  float lg[kMaxPerThread], bias[kMaxPerThread];
#pragma unroll
  for (int i = 0; i < kMaxPerThread; ++i) {
    const int p = threadIdx.x + i * kThreads;
    lg[i] = p < n ? __ldcg(logits + p) : 0.0f;
    bias[i] = p < n && a.bias ? load_any(a.bias, a.bias_dtype, p % E) : 0.0f;
  }
#pragma unroll
  for (int i = 0; i < kMaxPerThread; ++i) {
    const int p = threadIdx.x + i * kThreads;
    if (p >= n) break;
    const float sc = static_cast<float>(1.0 / (1.0 + exp(-static_cast<double>(lg[i]))));
    score[p / E][p % E] = sc;
    const float b = __fadd_rn(sc, bias[i]);  // selection only; NaN ranks last
    biased[p / E][p % E] = isnan(b) ? -FLT_MAX : b;
  }
  for (int c = threadIdx.x; c < T * n_cand; c += kThreads) cand[c / n_cand][c % n_cand] = -1;  // short last slices
  __syncthreads();
  for (int p = threadIdx.x; p < n; p += kThreads) {
    const int t = p / static_cast<int>(E), e = p % static_cast<int>(E);
    const int first = e / kSlice * kSlice, last = min(first + kSlice, static_cast<int>(E));
    int rank = 0;
    for (int o = first; o < last; ++o) rank += beats(t, o, e);
    if (rank < k) cand[t][e / kSlice * k + rank] = e;
  }
  __syncthreads();
  for (int c = threadIdx.x; c < T * n_cand; c += kThreads) {
    const int t = c / n_cand, e = cand[t][c % n_cand];
    if (e < 0) continue;
    int rank = 0;
    for (int i = 0; i < n_cand; ++i) {
      const int o = cand[t][i];
      rank += o >= 0 && beats(t, o, e);
    }
    if (rank < k) chosen[t][rank] = score[t][e], chosen_id[t][rank] = e;
  }
  __syncthreads();
  // Thread (t, j): the weight of token t's j-th expert (each thread sums its
  // token's k scores in the same order, so all agree with the CPU's sum).
  if (threadIdx.x >= T * k) return;
  const int t = threadIdx.x / k, j = threadIdx.x % k;
  double sum = 0;
  for (int i = 0; i < k; ++i) sum += chosen[t][i];
  a.expert_ids[(t0 + t) * k + j] = chosen_id[t][j];
  a.weights[(t0 + t) * k + j] = static_cast<float>(chosen[t][j] / sum * static_cast<double>(a.scaling));
}

// Launched early (launch_pdl): the block's gate rows are prefetched into L2
// while the RMSNorm before it finishes, then it waits for x.
template <DType WT>
__global__ void __launch_bounds__(kThreads) route_kernel(RouteArgs a, int G) {
  extern __shared__ float4 xs[];
  __shared__ float red[kWarps][kRows][kTokens];
  __shared__ bool last;
  const DeviceWeight& w = a.gate;
  const int64_t E = w.rows, H = w.cols;
  const int64_t rows_per_block = static_cast<int64_t>(kWarps / G) * kRows;
  if (threadIdx.x == 0 && blockIdx.y == 0)
    prefetch_rows_l2<WT>(w, blockIdx.x * rows_per_block, rows_per_block);
  grid_dependency_wait();
  allow_dependents();
  const int64_t t0 = static_cast<int64_t>(blockIdx.y) * kTokens;
  const int T = a.T - t0 < kTokens ? static_cast<int>(a.T - t0) : kTokens;
  const XLayout lay = make_layout<WT>(H, kWarp * G);
  stage_rows<WT>(xs, lay, T, H, [&](int t) { return a.x + (t0 + t) * H; });
  __syncthreads();

  // Logits of this block's gate rows for the group's tokens.
  const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
  const int64_t n = static_cast<int64_t>(blockIdx.x) * rows_per_block + (warp / G) * kRows;
  float acc[kRows][kTokens] = {};
  dot_rows<WT, kTokens, kRows>(w, n, xs, lay, (warp % G) * kWarp + lane, T, acc);
#pragma unroll
  for (int r = 0; r < kRows; ++r)
#pragma unroll
    for (int t = 0; t < kTokens; ++t)
      if (t < T) acc[r][t] = warp_sum(acc[r][t]);  // T is the block's: every lane takes part (decode: 2 sums, not 8)
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

  // The last block of the group to finish selects the experts. (Spelled out,
  // not last_to_arrive of common.cuh: with it ptxas spilled registers here.)
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0) last = atomicAdd(&a.counters[blockIdx.y], 1u) == gridDim.x - 1;
  __syncthreads();
  if (!last) return;
  __threadfence();
  select_experts(a.logits + t0 * E, a, E, t0, T);
  if (threadIdx.x == 0) a.counters[blockIdx.y] = 0;  // ready for the next launch
}

// The selection alone, for logits a GEMM wrote before (route_gemm.h): block
// x selects for tokens [4 x, 4 x + 4).
__global__ void __launch_bounds__(kThreads) route_select_kernel(RouteArgs a) {
  grid_dependency_wait();  // the logits are the kernel before's
  allow_dependents();
  const int64_t t0 = static_cast<int64_t>(blockIdx.x) * kTokens;
  const int T = a.T - t0 < kTokens ? static_cast<int>(a.T - t0) : kTokens;
  select_experts(a.logits + t0 * a.gate.rows, a, a.gate.rows, t0, T);
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
  return launch_pdl(route_kernel<WT>, grid, kThreads, smem, stream, a, G);
}

}  // namespace

int64_t route_counter_count(int64_t T) { return ceil_div(T, kTokens); }

cudaError_t launch_route_select(const RouteArgs& a, cudaStream_t stream) {
  if (a.gate.rows > kMaxExperts || a.top_k > kMaxTopK || a.top_k > a.gate.rows || a.T <= 0 || !a.logits)
    return cudaErrorInvalidValue;
  return launch_pdl(route_select_kernel, static_cast<unsigned>(ceil_div(a.T, kTokens)), kThreads, 0, stream, a);
}

cudaError_t launch_route(const RouteArgs& a, int num_sms, cudaStream_t stream) {
  if (a.gate.rows > kMaxExperts || a.top_k > kMaxTopK || a.top_k > a.gate.rows ||
      !gemv_compatible(a.gate))
    return cudaErrorInvalidValue;
  switch (a.gate.dtype) {
    case DType::kF32: return launch_typed<DType::kF32>(a, num_sms, stream);
    case DType::kBF16: return launch_typed<DType::kBF16>(a, num_sms, stream);
    default: return cudaErrorInvalidValue;
  }
}

}  // namespace m2::cuda
