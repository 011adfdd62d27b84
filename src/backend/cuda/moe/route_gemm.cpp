#include "backend/cuda/moe/route_gemm.h"

#include <cstdlib>
#include <cstring>

#include "backend/cuda/gemm/cublaslt_plans.h"
#include "util/log.h"

namespace m2::cuda {

RouteGemm::RouteGemm(bool enabled) : enabled_(enabled) {}
RouteGemm::~RouteGemm() = default;

bool RouteGemm::applies(const float* x, int64_t T, const DeviceWeight& gate, const float* logits) const {
  auto aligned16 = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
  return enabled_ && gate.dtype == DType::kF32 && T >= kRouteGemmMinTokens && gate.rows > 0 && gate.cols % 4 == 0 &&
         gate.rows % 4 == 0 && aligned16(x) && aligned16(gate.data) && aligned16(logits);
}

LtPlans& RouteGemm::lt() {
  if (!lt_) lt_ = std::make_unique<LtPlans>(LtPlanSpec{CUDA_R_32F, CUDA_R_32F, 16, "FP32 router", "the GEMV router"});
  return *lt_;
}

void RouteGemm::reserve(cudaStream_t stream) {
  if (enabled_) lt().reserve_workspace(stream);
}

cudaError_t RouteGemm::logits(const float* x, int64_t T, const DeviceWeight& gate, float* logits,
                              cudaStream_t stream) {
  if (!applies(x, T, gate, logits)) return cudaErrorInvalidValue;
  if (!lt().handle()) return cudaErrorNotSupported;
  const int64_t E = gate.rows, H = gate.cols;
  const LtPlan& p = lt_->plan(T, E, H, E);
  if (!p.ok) return cudaErrorNotSupported;
  const float one = 1.0f, zero = 0.0f;
  const cublasStatus_t st = cublasLtMatmul(lt_->handle(), p.op, &one, gate.data, p.a, x, p.b, &zero, logits, p.d,
                                           logits, p.d, &p.algo, lt_->workspace(stream), LtPlans::kWorkspaceBytes,
                                           stream);
  if (st != CUBLAS_STATUS_SUCCESS) {
    log_error("cublasLtMatmul (FP32 router, T={} E={} H={}) failed: {}", T, E, H, cublasLtGetStatusName(st));
    return cudaErrorUnknown;
  }
  return cudaGetLastError();
}

}  // namespace m2::cuda
