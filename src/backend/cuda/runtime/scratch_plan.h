// The CUDA backend's op scratch, sized once for the largest step within the
// engine's limits (Backend::reserve_scratch) so that no op allocates while
// serving: an allocation mid-run costs a device synchronisation, retires the
// recorded step graphs and, repeated at new maxima, let a long-running
// server's memory creep upwards. Pure host code: each size is what the op's
// plan (gemm/, moe/, attention/) asks for, maximised over every step shape
// within the limits; `m2cpp info --plan` prints it.
#pragma once

#include <cstddef>
#include <string>

#include "backend/cuda/runtime/cuda_options.h"
#include "io/model_config.h"
#include "model/backend.h"

namespace m2::cuda {

struct DeviceCaps;

// Bytes per buffer (0: the step never takes it).
struct ScratchPlan {
  size_t route_logits = 0;           // the router GEMM's fp32 logits [T, experts]
  size_t route_counters = 0;         // the one-kernel router's group counters
  size_t moe = 0;                    // the MoE's grouping, intermediate activations, FP8 and CUTLASS regions
  size_t moe_counters = 0;           // the wgmma decode MoE's tile counters
  size_t moe_local_routing = 0;      // expert parallelism: the rank's rewritten ids and weights (route_local.cu)
  size_t attn_partials = 0;          // the general attention kernel's split partials
  size_t attn_decode_partials = 0;   // the decode kernels' split partials
  size_t attn_counters = 0;          // the decode kernels' split counters
  size_t attn_meta = 0;              // the attention work list and block tables
  size_t flashinfer_q = 0;           // FlashInfer prefill: bf16 q, and as much for o
  size_t flashinfer_pages = 0;       // ... bf16 copies of an FP8 cache's pages: k, and as much for v
  size_t flashinfer_page_ids = 0;    // ... those pages' ids and the sequences' tables into them
  size_t flashinfer_plan = 0;        // ... its packed work plan
  int64_t fp8_copy_elems = 0;        // T x K of a producer's FP8 copy of its output (codes; scales / 32)
  int64_t fp8_quant_elems = 0;       // T x K the dense FP8 path quantises (codes; scales and split scales / 32)
  int64_t bf16_split_elems = 0;      // T x K the BF16 tensor-core path splits into hi + lo
  size_t step_arrays = 0;            // token ids, positions, KV slots, logit rows
  size_t sampling = 0;               // the sampler's row arguments and results
  size_t fp8_quant_bytes() const;  // codes, scales and split scales
  size_t fp8_copy_bytes() const;  // codes, scales and split scales
  size_t total() const;
  std::string describe() const;      // one line per buffer, MiB
};

ScratchPlan plan_scratch(const ModelConfig& c, const StepLimits& l, const CudaOptions& o, const DeviceCaps& caps);

}  // namespace m2::cuda
