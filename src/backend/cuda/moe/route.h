// Launchers of route.cu: the sigmoid top-k router.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "backend/cuda/runtime/device_types.h"

namespace m2::cuda {

// ---- route.cu -----------------------------------------------------------------
struct RouteArgs {
  const float* x = nullptr;  // [T, H]
  int64_t T = 0;
  DeviceWeight gate;              // [E, H], F32 or BF16
  const void* bias = nullptr;     // [E] or null
  DType bias_dtype = DType::kF32;
  int top_k = 0;
  float scaling = 1.0f;
  float* logits = nullptr;        // [T, E]: written (both kernels), read by route_forced after
  unsigned* counters = nullptr;   // scratch [ceil(T / 4)], zero (the kernel leaves them zero)
  int32_t* expert_ids = nullptr;  // [T, top_k]
  float* weights = nullptr;       // [T, top_k]
};
cudaError_t launch_route(const RouteArgs& a, int num_sms, cudaStream_t stream);
// The selection of launch_route alone, from a.logits [T, E] written before
// (a GEMM: route_gemm.h); a.counters is not used.
cudaError_t launch_route_select(const RouteArgs& a, cudaStream_t stream);
// Elements of `counters` launch_route needs for T tokens.
int64_t route_counter_count(int64_t T);

// ---- route_forced.cu ----------------------------------------------------------
// Routing replay: each token t whose forced[t * top_k] >= 0 gets experts
// forced[t, :] (distinct, < E: checked by the model) weighted by
// sigmoid(logits[t, e]) renormalised over them, times `scaling` (the
// router's own arithmetic and the CPU backend's); other tokens keep what
// launch_route wrote. logits [T, E] fp32, as launch_route or the GEMM wrote
// them; top_k <= 16.
cudaError_t launch_route_forced(const float* logits, int64_t T, int64_t E, const int32_t* forced, int top_k,
                                float scaling, int32_t* expert_ids, float* weights, cudaStream_t stream);

// ---- route_local.cu -----------------------------------------------------------
// Expert parallelism: ids/weights [n] (global expert ids) rewritten for a rank
// holding experts [first, first + count): local id e - first with its weight,
// or local 0 with weight 0 for an expert another rank holds.
cudaError_t launch_route_local(const int32_t* ids, const float* weights, int64_t n, int first, int count,
                               int32_t* local_ids, float* local_weights, cudaStream_t stream);

}  // namespace m2::cuda
