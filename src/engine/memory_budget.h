// --gpu-memory-utilization (vLLM's meaning): the fraction of the device's
// total memory m2cpp may use for weights, activations and the KV cache
// together. The KV pool gets what is left of that fraction after the
// weights (measured on the device once uploaded) and an activation reserve
// (estimated from the step limits).
#pragma once

#include <cstdint>
#include <span>

#include "io/model_config.h"
#include "util/status.h"

namespace m2 {

// Activation memory of a step of `max_tokens` tokens with `max_rows` logit
// rows (the model's scratch, the backend's op scratch, the logits), plus a
// fixed 1 GiB for the runtime (CUDA context, cuBLASLt workspace, allocator slack).
int64_t activation_reserve_bytes(const ModelConfig& c, int64_t max_tokens, int64_t max_rows);

// KV-cache bytes: utilization x total - weights - activations. Errors (in
// GiB) when the utilization is outside (0, 1], when the weights alone exceed
// the budget, or when nothing is left for the cache.
Result<int64_t> kv_cache_budget(double utilization, int64_t total_bytes, int64_t weight_bytes,
                                int64_t activation_bytes);

// What one rank of a tensor-parallel group holds on its device.
struct RankMemory {
  int device = 0;            // ranks on the same device share its budget
  int64_t total_bytes = 0;   // the device's memory
  int64_t weight_bytes = 0;  // the rank's weight copies (Backend::weight_bytes)
};

// KV-cache bytes of every rank (each rank gets the same, as every rank's
// cache holds the same tokens): on each device, utilization x total less its
// ranks' weights and an activation reserve per rank, shared by those ranks;
// the least over the devices. Errors as kv_cache_budget's, naming the device.
Result<int64_t> kv_cache_budget_per_rank(double utilization, std::span<const RankMemory> ranks,
                                         int64_t activation_bytes);

}  // namespace m2
