#include "backend/cuda/gemm/matmul_plan.h"

#include <fmt/format.h>

#include "backend/cuda/runtime/device_caps.h"

#include "backend/cuda/gemm/bf16_matmul.h"
#include "backend/cuda/gemm/fp8_gemm.h"
#include "backend/cuda/gemm/matmul.h"
#include "backend/cuda/runtime/device_buffer.h"

namespace m2::cuda {
namespace {

// Shared memory a GEMV block stages x in (gemv.cuh's layout: each 16-byte
// chunk of a weight row holds 16 / dtype_size columns, 256 lanes a row), for
// 4 tokens; gemv_mma stages K floats per token. Both at most kGemvMaxSmem.
constexpr int64_t kGemvMaxSmem = 200 * 1024;  // common.cuh's kMaxDynamicSmem
int64_t gemv_smem4(int64_t K, DType dt) {
  const int64_t per16 = 16 / static_cast<int64_t>(dtype_size(dt)), lanes = 256;
  const int64_t chunks = (K / per16 + lanes - 1) / lanes;
  return chunks * (per16 / 4) * lanes * 4 * 16;
}

}  // namespace

const char* matmul_kernel_name(MatmulKernel k) {
  switch (k) {
    case MatmulKernel::kGemv: return "gemv";
    case MatmulKernel::kGemvMma: return "gemv_mma";
    case MatmulKernel::kTiledSimt: return "tiled_simt";
    case MatmulKernel::kFp8Own: return "fp8_own";
    case MatmulKernel::kFp8CublasLt: return "fp8_cublaslt";
    case MatmulKernel::kBf16CublasLt: return "bf16_cublaslt";
  }
  return "?";
}

MatmulPlan plan_matmul(const MatmulShape& s, const CudaOptions& o, const DeviceCaps& caps) {
  MatmulPlan p;
  const int64_t T = s.tokens, N = s.rows, K = s.cols;
  const Fp8GemmMode fp8 = fp8_gemm_mode_for(o.fp8_gemm, caps.features);
  const bool w_rows16 = K * static_cast<int64_t>(dtype_size(s.dtype)) % 16 == 0;  // gemv_compatible
  const bool invariant = o.batch_invariant;
  if (s.dtype == DType::kF8E4M3 && fp8 != Fp8GemmMode::kOff && T >= fp8_gemm_min_tokens(o) &&
      N % kFp8Block == 0 && K % kFp8Block == 0 && s.packed_scales && s.aligned) {
    p.fp8_activations = true;
    p.kernel = p.fallback = MatmulKernel::kFp8Own;
    if (fp8 == Fp8GemmMode::kCublasLt && !invariant && N >= Fp8Matmul::kLtMinDim && K >= Fp8Matmul::kLtMinDim) {
      p.kernel = MatmulKernel::kFp8CublasLt;
      p.lt_rows = T - T % Fp8Matmul::kLtRowMultiple;
      p.own_rows = T - p.lt_rows;
    }
    p.quantize_bytes = align256(static_cast<size_t>(T * K)) + align256(sizeof(float) * static_cast<size_t>(T * (K / 128)));
    p.scratch_bytes = p.own_rows ? align256(sizeof(float) * static_cast<size_t>(p.lt_rows * (K / 128))) : 0;
    return p;
  }
  const bool gemv =
      s.aligned && w_rows16 && (T <= kGemvMaxTokens || invariant) && gemv_smem4(K, s.dtype) <= kGemvMaxSmem;
  MatmulKernel simt = MatmulKernel::kTiledSimt;
  if (gemv) {
    if (o.gemv_mma && !invariant && s.dtype == DType::kF8E4M3 && K % kFp8Block == 0 && K * 4 <= kGemvMaxSmem) {
      simt = MatmulKernel::kGemvMma;
      p.tokens_per_pass = 8;
    } else {
      simt = MatmulKernel::kGemv;
      p.tokens_per_pass = T == 1 ? 1 : 4;
    }
  }
  p.kernel = p.fallback = simt;
  if (o.bf16_gemm && !invariant && s.dtype == DType::kBF16 && T >= kBf16GemmMinTokens && K % 8 == 0 && s.aligned) {
    p.kernel = MatmulKernel::kBf16CublasLt;
    p.scratch_bytes = 2 * align256(sizeof(uint16_t) * static_cast<size_t>(T * K));
  }
  return p;
}

std::string MatmulPlan::describe() const {
  switch (kernel) {
    case MatmulKernel::kGemv:
    case MatmulKernel::kGemvMma:
      return fmt::format("{} ({} token{} a pass over W)", matmul_kernel_name(kernel), tokens_per_pass,
                         tokens_per_pass == 1 ? "" : "s");
    case MatmulKernel::kFp8CublasLt:
      return own_rows ? fmt::format("fp8_cublaslt on {} rows + fp8_own on {} (fp8_own without a cuBLASLt algorithm)",
                                    lt_rows, own_rows)
                      : fmt::format("fp8_cublaslt on {} rows (fp8_own without a cuBLASLt algorithm)", lt_rows);
    case MatmulKernel::kBf16CublasLt:
      return fmt::format("bf16_cublaslt (x as bf16 hi + lo; {} without a cuBLASLt algorithm)",
                         matmul_kernel_name(fallback));
    default: return matmul_kernel_name(kernel);
  }
}

}  // namespace m2::cuda
