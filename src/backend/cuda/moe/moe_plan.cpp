#include "backend/cuda/moe/moe_plan.h"

#include <fmt/format.h>

#include "backend/cuda/gemm/fp8_gemm.h"
#include "backend/cuda/moe/moe.h"
#include "backend/cuda/moe/route_gemm.h"
#include "backend/cuda/runtime/device_caps.h"

namespace m2::cuda {
namespace {

MoePlan choose_moe(const MoeShape& s, const CudaOptions& o, const DeviceCaps& caps) {
  MoePlan p;
  const int64_t pairs = s.tokens * s.top_k;
  const bool fp8_tiles = s.dtype == DType::kF8E4M3 && s.hidden % kFp8Block == 0 && s.intermediate % kFp8Block == 0;
  if (pairs <= kMoeDecodePairs && !o.batch_invariant) {
    // The wgmma down pass stages 20 bytes + a scale per 128 of I a block (moe_decode_wgmma.cu).
    const int64_t down_smem = 20 * s.intermediate + (s.intermediate / kFp8Block) * 4;
    const bool wgmma = caps.features.wgmma && o.moe_decode_wgmma && fp8_tiles && down_smem <= 200 * 1024 &&
                       s.top_k >= 1 && s.top_k <= kMoeMaxTopK;
    p.kernel = wgmma ? MoeKernel::kDecodeWgmma : MoeKernel::kDecodeSimt;
    return p;
  }
  const bool tensor_cores =
      fp8_gemm_mode_for(o.fp8_gemm, caps.features) != Fp8GemmMode::kOff && caps.features.fp8_moe && fp8_tiles;
  if (!tensor_cores) {
    p.kernel = MoeKernel::kGroupedSimt;
    p.tile_pairs = 4;
    return p;
  }
  p.fp8_activations = true;
  p.kernel = caps.features.cutlass_moe && o.moe_cutlass && !o.batch_invariant ? MoeKernel::kGroupedCutlass
                                                                                : MoeKernel::kGroupedFp8;
  p.tile_pairs = p.kernel == MoeKernel::kGroupedFp8 ? fp8_moe_tile_pairs(pairs, s.experts) : 0;
  return p;
}

}  // namespace

const char* moe_kernel_name(MoeKernel k) {
  switch (k) {
    case MoeKernel::kDecodeSimt: return "decode_simt";
    case MoeKernel::kDecodeWgmma: return "decode_wgmma";
    case MoeKernel::kGroupedSimt: return "grouped_simt";
    case MoeKernel::kGroupedFp8: return "grouped_fp8";
    case MoeKernel::kGroupedCutlass: return "grouped_cutlass";
  }
  return "?";
}

MoePlan plan_moe(const MoeShape& s, const CudaOptions& o, const DeviceCaps& caps) {
  MoePlan p = choose_moe(s, o, caps);
  p.scratch_bytes = moe_scratch_bytes(s.tokens, s.top_k, s.hidden, s.intermediate, s.experts,
                                      p.kernel == MoeKernel::kGroupedCutlass);
  return p;
}

std::string MoePlan::describe() const {
  if (tile_pairs > 0) return fmt::format("{} (tiles of {} pairs)", moe_kernel_name(kernel), tile_pairs);
  if (kernel == MoeKernel::kGroupedCutlass) return "grouped_cutlass (one group per expert)";
  return moe_kernel_name(kernel);
}

RouteKernel plan_route(int64_t tokens, int64_t experts, int64_t hidden, DType gate_dtype, const CudaOptions& o) {
  const bool gemm = o.route_gemm && !o.batch_invariant && gate_dtype == DType::kF32 && tokens >= kRouteGemmMinTokens && experts > 0 &&
                    experts % 4 == 0 && hidden % 4 == 0;
  return gemm ? RouteKernel::kGemm : RouteKernel::kFused;
}

const char* route_kernel_name(RouteKernel k) { return k == RouteKernel::kGemm ? "route_gemm" : "route_fused"; }

}  // namespace m2::cuda
