// Which kernels run the routed experts of one MoE layer (the moe op) and the
// router before them (the route op): the one place the choice is made, a
// pure function of the shape, the options and the device (tested without a
// GPU, printed by `m2cpp info --plan`). P = tokens x top_k (token, expert) pairs.
//
//   kernel           when                                              activations
//   decode_simt      P <= 64: up and down passes stream each selected   fp32
//                    expert once (moe_decode.cu)
//   decode_wgmma     P <= 64, FP8 experts in 128-multiples, sm_90a:     fp32
//                    the down pass on wgmma (moe_decode_wgmma.cu)
//   grouped_simt     P > 64: pairs grouped by expert on the GPU, tiles  fp32
//                    of 4 pairs share a pass over the weights (moe.cu)
//   grouped_fp8      P > 64, FP8 experts in 128-multiples: tiles of 64  e4m3 per token per 128
//                    pairs on tensor cores (moe_fp8.cu)
//   grouped_cutlass  as grouped_fp8 on CUTLASS's grouped GEMMs, one     e4m3 per token per 128
//                    group per expert (moe_cutlass.cu; sm_90, CUTLASS build)
//
//   batch_invariant: the grouped kernels for every P (grouped_fp8 where
//   tensor cores take the experts, not CUTLASS, else grouped_simt): each pair's
//   result depends on its own row only, and each token's k results are summed in
//   slot order, so a token's output does not depend on the step.
//
//   router           when
//   route_fused      T < 17: one kernel (logits, top-k, weights)
//   route_gemm       T >= 17, fp32 gate: the logits as one cuBLASLt fp32 GEMM, then the
//                    selection kernel (the fused kernel without a cuBLASLt algorithm);
//                    never with batch_invariant
#pragma once

#include <cstdint>
#include <string>

#include "backend/cuda/runtime/cuda_options.h"
#include "tensor/dtype.h"

namespace m2::cuda {

struct DeviceCaps;  // runtime/device_caps.h

enum class MoeKernel { kDecodeSimt, kDecodeWgmma, kGroupedSimt, kGroupedFp8, kGroupedCutlass };
const char* moe_kernel_name(MoeKernel k);

struct MoeShape {
  int64_t tokens = 0;
  int top_k = 0;
  int64_t hidden = 0, intermediate = 0, experts = 0;
  DType dtype = DType::kF8E4M3;  // the experts' stored dtype
};

struct MoePlan {
  MoeKernel kernel = MoeKernel::kDecodeSimt;
  int tile_pairs = 0;  // grouped kernels: pairs of one expert sharing a pass over its weights
  // x in e4m3 per token per 128 channels, from its producer's FP8 copy
  // where one was written (fp8_act_copy.h), else quantised first.
  bool fp8_activations = false;
  // The MoE scratch of the step (moe_scratch_bytes: the grouping, the
  // intermediate activations, the FP8 and CUTLASS regions).
  size_t scratch_bytes = 0;
  std::string describe() const;
};

MoePlan plan_moe(const MoeShape& s, const CudaOptions& o, const DeviceCaps& caps);

enum class RouteKernel { kFused, kGemm };
// The router of `tokens` tokens over a gate [experts, hidden] of `gate_dtype`.
RouteKernel plan_route(int64_t tokens, int64_t experts, int64_t hidden, DType gate_dtype, const CudaOptions& o);
const char* route_kernel_name(RouteKernel k);

}  // namespace m2::cuda
