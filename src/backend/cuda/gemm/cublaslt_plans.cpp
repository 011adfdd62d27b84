#include "backend/cuda/gemm/cublaslt_plans.h"

#include <utility>

#include "util/log.h"

namespace m2::cuda {
namespace {

void destroy(LtPlan& p) {
  if (p.d) cublasLtMatrixLayoutDestroy(p.d);
  if (p.b) cublasLtMatrixLayoutDestroy(p.b);
  if (p.a) cublasLtMatrixLayoutDestroy(p.a);
  if (p.op) cublasLtMatmulDescDestroy(p.op);
  p = LtPlan{};
}

template <class T>
bool pref_set(cublasLtMatmulPreference_t pref, cublasLtMatmulPreferenceAttributes_t attr, const T& v) {
  return cublasLtMatmulPreferenceSetAttribute(pref, attr, &v, sizeof(v)) == CUBLAS_STATUS_SUCCESS;
}

}  // namespace

LtPlans::LtPlans(LtPlanSpec spec) : spec_(std::move(spec)) {
  const cublasStatus_t st = cublasLtCreate(&handle_);
  if (st != CUBLAS_STATUS_SUCCESS) {
    handle_ = nullptr;
    log_warn("cublasLtCreate failed ({}): {} matmuls take {}", cublasLtGetStatusName(st), spec_.what, spec_.fallback);
  }
}

LtPlans::~LtPlans() {
  for (auto& [key, p] : plans_) destroy(p);
  if (handle_) cublasLtDestroy(handle_);
}

const LtPlan& LtPlans::plan(int64_t T, int64_t N, int64_t K, int64_t ldy,
                            const std::function<bool(cublasLtMatmulDesc_t)>& configure) {
  const std::array<int64_t, 4> key{T, N, K, ldy};
  auto it = plans_.find(key);
  if (it != plans_.end()) return it->second;
  LtPlan p;
  const cublasOperation_t transa = CUBLAS_OP_T, transb = CUBLAS_OP_N;
  const size_t workspace = kWorkspaceBytes;
  cublasLtMatmulPreference_t pref = nullptr;
  bool ok = handle_ && cublasLtMatmulDescCreate(&p.op, CUBLAS_COMPUTE_32F, CUDA_R_32F) == CUBLAS_STATUS_SUCCESS &&
            lt_set(p.op, CUBLASLT_MATMUL_DESC_TRANSA, transa) && lt_set(p.op, CUBLASLT_MATMUL_DESC_TRANSB, transb) &&
            (!configure || configure(p.op)) &&
            cublasLtMatrixLayoutCreate(&p.a, spec_.w_type, K, N, K) == CUBLAS_STATUS_SUCCESS &&
            cublasLtMatrixLayoutCreate(&p.b, spec_.x_type, K, T, K) == CUBLAS_STATUS_SUCCESS &&
            cublasLtMatrixLayoutCreate(&p.d, CUDA_R_32F, N, T, ldy) == CUBLAS_STATUS_SUCCESS &&
            cublasLtMatmulPreferenceCreate(&pref) == CUBLAS_STATUS_SUCCESS &&
            pref_set(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, workspace);
  if (spec_.min_align > 0)
    for (auto attr : {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
                      CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES})
      ok = ok && pref_set(pref, attr, spec_.min_align);
  cublasLtMatmulHeuristicResult_t heur{};
  int found = 0;
  ok = ok && cublasLtMatmulAlgoGetHeuristic(handle_, p.op, p.a, p.b, p.d, p.d, pref, 1, &heur, &found) ==
                 CUBLAS_STATUS_SUCCESS && found > 0;
  if (pref) cublasLtMatmulPreferenceDestroy(pref);
  if (ok) {
    p.algo = heur.algo;
    p.ok = true;
  } else {
    destroy(p);
    log_warn("cuBLASLt has no {} matmul for T={} N={} K={} (ldy {}): {} runs it", spec_.what, T, N, K, ldy,
             spec_.fallback);
  }
  return plans_.emplace(key, p).first->second;
}

}  // namespace m2::cuda
