// The dense BF16 tensor-core path (bf16_matmul.h): x split into bf16 hi + lo
// (launch_split_bf16, matmul.cu), then two cuBLASLt BF16 GEMMs with fp32
// accumulation and fp32 output: y = hi · Wᵀ, then y += lo · Wᵀ.
//
// Layout: cublaslt_plans.h, with B = hi or lo. The second GEMM reads y back
// as C (beta 1, C = D with the same layout: in place).
//
// Cost: W is read twice, once per GEMM. Accepted for the fp32 accuracy it
// buys (bf16_matmul.h): the lm_head (1.23 GB) at decode batches is
// memory-bound, and two reads at HBM speed (~0.6 ms on an H200) are expected
// well under the SIMT kernel's 3.2 ms at T = 64 (cuda_kernels_bench rows
// "lm_head tensor cores" and "lm_head [BF16 GEMM off]" measure both).
#include "backend/cuda/gemm/bf16_matmul.h"

#include <cublasLt.h>

#include <cstdlib>
#include <cstring>

#include "backend/cuda/gemm/cublaslt_plans.h"
#include "util/log.h"

namespace m2::cuda {

namespace {

// What applies() guarantees of W, the split scratch (256) and y: the
// heuristic may only pick algorithms that work at this alignment (its
// default assumes 256-byte aligned buffers).
constexpr uint32_t kMinAlignBytes = 16;


// hi and lo of `elems` bf16 values, each at a 256-byte boundary.
size_t split_bytes(int64_t elems) {
  ScratchLayout size(nullptr);
  size.take(sizeof(uint16_t) * static_cast<size_t>(elems));
  size.take(sizeof(uint16_t) * static_cast<size_t>(elems));
  return size.size();
}

}  // namespace

Bf16Matmul::Bf16Matmul(bool enabled) : enabled_(enabled) {}
Bf16Matmul::~Bf16Matmul() = default;

LtPlans& Bf16Matmul::lt() {
  if (!lt_)
    lt_ = std::make_unique<LtPlans>(
        LtPlanSpec{CUDA_R_16BF, CUDA_R_16BF, kMinAlignBytes, "BF16", "the SIMT kernel of matmul.cu"});
  return *lt_;
}

void Bf16Matmul::reserve(int64_t elems, cudaStream_t stream) {
  if (!enabled_ || elems <= 0) return;
  split_.reserve_up_front(split_bytes(elems), stream);
  lt().reserve_workspace(stream);
}

bool Bf16Matmul::applies(const float* x, int64_t T, int64_t ldx, const DeviceWeight& w, const float* y,
                         int64_t ldy) const {
  auto aligned16 = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
  return enabled_ && w.dtype == DType::kBF16 && T >= kBf16GemmMinTokens && w.rows > 0 && w.cols > 0 &&
         w.cols % 8 == 0 && aligned16(x) && aligned16(w.data) && aligned16(y) && ldx % 4 == 0 && ldy % 4 == 0;
}

cudaError_t Bf16Matmul::run(const float* x, int64_t T, int64_t ldx, const DeviceWeight& w, float* y, int64_t ldy,
                            cudaStream_t stream) {
  if (!applies(x, T, ldx, w, y, ldy)) return cudaErrorInvalidValue;
  if (!lt().handle()) return cudaErrorNotSupported;
  const int64_t N = w.rows, K = w.cols;
  const LtPlan& p = lt_->plan(T, N, K, ldy);
  if (!p.ok) return cudaErrorNotSupported;

  const size_t half_bytes = sizeof(uint16_t) * static_cast<size_t>(T * K);
  ScratchLayout at(split_.reserve(split_bytes(T * K), stream));
  auto* hi = reinterpret_cast<uint16_t*>(at.take(half_bytes));
  auto* lo = reinterpret_cast<uint16_t*>(at.take(half_bytes));
  void* ws = lt_->workspace(stream);
  cudaError_t e = launch_split_bf16(x, T, K, ldx, hi, lo, stream);
  if (e != cudaSuccess) return e;

  const float one = 1.0f, zero = 0.0f;
  const struct {
    const uint16_t* b;
    const float* beta;
    const char* what;
  } passes[2] = {{hi, &zero, "y = hi * W^T"}, {lo, &one, "y += lo * W^T"}};
  for (const auto& pass : passes) {
    const cublasStatus_t st = cublasLtMatmul(lt_->handle(), p.op, &one, w.data, p.a, pass.b, p.b, pass.beta, y, p.d,
                                             y, p.d, &p.algo, ws, LtPlans::kWorkspaceBytes, stream);
    if (st != CUBLAS_STATUS_SUCCESS) {
      log_error("cublasLtMatmul (BF16, {}, T={} N={} K={} ldy={}) failed: {}", pass.what, T, N, K, ldy,
                cublasLtGetStatusName(st));
      return cudaErrorUnknown;
    }
  }
  return cudaGetLastError();
}

}  // namespace m2::cuda
