// The dense FP8 path of a backend: activation quantisation into scratch,
// then our mma.sync kernel (fp8_gemm.cu) or cuBLASLt's block-scaled FP8
// matmul, chosen by M2CPP_FP8_GEMM.
//
// cuBLASLt sees the row-major product y [T, N] = X [T, K] · Wᵀ as the
// column-major D [N, T] = op(A) · B with A = W stored column-major [K, N]
// (transa = T: W's rows are A's columns, ld K) and B = X column-major
// [K, T] (ld K): the "TN" layout FP8 needs. Scales: A (weights)
// CUBLASLT_MATMUL_MATRIX_SCALE_BLK128x128_32F, one fp32 per 128 x 128 block,
// the [N / 128, K / 128] row-major grid of the checkpoint; B (activations)
// CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F, one fp32 per 128 consecutive k of
// each column, stored with the outer dimension contiguous (s[kb * T + t]),
// which is what launch_quantize_fp8 writes (PyTorch's _scaled_mm checks the
// same layouts for its 1x128 / 128x128 cuBLASLt path).
#include <cublasLt.h>

#include <array>
#include <cstdlib>
#include <cstring>
#include <map>

#include "backend/cuda/fp8_gemm.h"
#include "util/log.h"

namespace m2::cuda {

Fp8GemmMode fp8_gemm_mode_from_env() {
  // Default cuBLASLt: its Hopper kernels (wgmma, TMA) are expected to beat
  // our mma.sync kernel at prefill sizes; bench rows "... own" vs
  // "... cublaslt" decide (docs/design.md, "FP8 GEMM").
  const char* v = std::getenv("M2CPP_FP8_GEMM");
  if (!v || !*v || std::strcmp(v, "cublaslt") == 0) return Fp8GemmMode::kCublasLt;
  if (std::strcmp(v, "own") == 0) return Fp8GemmMode::kOwn;
  if (std::strcmp(v, "off") == 0) return Fp8GemmMode::kOff;
  log_warn("M2CPP_FP8_GEMM={} is not one of own, cublaslt, off: using cublaslt", v);
  return Fp8GemmMode::kCublasLt;
}

const char* fp8_gemm_mode_name(Fp8GemmMode mode) {
  switch (mode) {
    case Fp8GemmMode::kOwn: return "own";
    case Fp8GemmMode::kCublasLt: return "cublaslt";
    default: return "off";
  }
}

namespace {

constexpr size_t kWorkspaceBytes = size_t{32} << 20;

// One shape's descriptors and chosen algorithm (ok false: none exists).
struct Plan {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
  cublasLtMatmulAlgo_t algo{};
  bool ok = false;
};

void destroy(Plan& p) {
  if (p.d) cublasLtMatrixLayoutDestroy(p.d);
  if (p.b) cublasLtMatrixLayoutDestroy(p.b);
  if (p.a) cublasLtMatrixLayoutDestroy(p.a);
  if (p.op) cublasLtMatmulDescDestroy(p.op);
  p = Plan{};
}

template <class T>
bool set(cublasLtMatmulDesc_t op, cublasLtMatmulDescAttributes_t attr, const T& v) {
  return cublasLtMatmulDescSetAttribute(op, attr, &v, sizeof(v)) == CUBLAS_STATUS_SUCCESS;
}

}  // namespace

struct Fp8Matmul::Lt {
  cublasLtHandle_t handle = nullptr;
  DeviceBuffer workspace;
  std::map<std::array<int64_t, 4>, Plan> plans;  // (T, N, K, ldy)

  ~Lt() {
    for (auto& [key, p] : plans) destroy(p);
    if (handle) cublasLtDestroy(handle);
  }

  // The plan for this shape, made on first use with this call's scale pointers.
  const Plan& plan(int64_t T, int64_t N, int64_t K, int64_t ldy, const float* a_scale, const float* b_scale) {
    const std::array<int64_t, 4> key{T, N, K, ldy};
    auto it = plans.find(key);
    if (it != plans.end()) return it->second;
    Plan p;
    const cublasOperation_t transa = CUBLAS_OP_T, transb = CUBLAS_OP_N;
    const int32_t a_mode = CUBLASLT_MATMUL_MATRIX_SCALE_BLK128x128_32F, b_mode = CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F;
    cublasLtMatmulPreference_t pref = nullptr;
    bool ok = cublasLtMatmulDescCreate(&p.op, CUBLAS_COMPUTE_32F, CUDA_R_32F) == CUBLAS_STATUS_SUCCESS &&
              set(p.op, CUBLASLT_MATMUL_DESC_TRANSA, transa) && set(p.op, CUBLASLT_MATMUL_DESC_TRANSB, transb) &&
              set(p.op, CUBLASLT_MATMUL_DESC_A_SCALE_MODE, a_mode) &&
              set(p.op, CUBLASLT_MATMUL_DESC_B_SCALE_MODE, b_mode) &&
              set(p.op, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, a_scale) &&
              set(p.op, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, b_scale) &&
              cublasLtMatrixLayoutCreate(&p.a, CUDA_R_8F_E4M3, K, N, K) == CUBLAS_STATUS_SUCCESS &&
              cublasLtMatrixLayoutCreate(&p.b, CUDA_R_8F_E4M3, K, T, K) == CUBLAS_STATUS_SUCCESS &&
              cublasLtMatrixLayoutCreate(&p.d, CUDA_R_32F, N, T, ldy) == CUBLAS_STATUS_SUCCESS &&
              cublasLtMatmulPreferenceCreate(&pref) == CUBLAS_STATUS_SUCCESS &&
              cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &kWorkspaceBytes,
                                                   sizeof(kWorkspaceBytes)) == CUBLAS_STATUS_SUCCESS;
    cublasLtMatmulHeuristicResult_t heur{};
    int found = 0;
    ok = ok && cublasLtMatmulAlgoGetHeuristic(handle, p.op, p.a, p.b, p.d, p.d, pref, 1, &heur, &found) ==
                   CUBLAS_STATUS_SUCCESS && found > 0;
    if (pref) cublasLtMatmulPreferenceDestroy(pref);
    if (ok) {
      p.algo = heur.algo;
      p.ok = true;
    } else {
      destroy(p);
      log_warn("cuBLASLt has no block-scaled FP8 matmul for T={} N={} K={} (ldy {})", T, N, K, ldy);
    }
    return plans.emplace(key, p).first->second;
  }
};

Fp8Matmul::Fp8Matmul(Fp8GemmMode mode) : mode_(mode) {}
Fp8Matmul::~Fp8Matmul() = default;

bool Fp8Matmul::applies(const float* x, int64_t T, int64_t ldx, const DeviceWeight& w, const float* y,
                        int64_t ldy) const {
  return mode_ != Fp8GemmMode::kOff && T >= kFp8GemmMinTokens && fp8_gemm_supported(w) &&
         reinterpret_cast<uintptr_t>(x) % 16 == 0 && ldx % 4 == 0 && reinterpret_cast<uintptr_t>(y) % 8 == 0 &&
         ldy % 2 == 0;
}

cudaError_t Fp8Matmul::run(const float* x, int64_t T, int64_t ldx, const DeviceWeight& w, float* y, int64_t ldy,
                           cudaStream_t stream) {
  const int64_t K = w.cols;
  auto* q = static_cast<uint8_t*>(q_.reserve(static_cast<size_t>(T * K), stream));
  auto* s = static_cast<float*>(s_.reserve(sizeof(float) * static_cast<size_t>(T * (K / 128)), stream));
  cudaError_t e = launch_quantize_fp8(x, T, K, ldx, q, s, stream);
  if (e != cudaSuccess) return e;
  if (mode_ == Fp8GemmMode::kCublasLt) {
    e = run_cublaslt(q, s, T, w, y, ldy, stream);
    if (e != cudaErrorNotSupported) return e;
  }
  return launch_fp8_gemm(q, s, T, w, y, ldy, stream);
}

cudaError_t Fp8Matmul::run_cublaslt(const uint8_t* q, const float* s, int64_t T, const DeviceWeight& w, float* y,
                                    int64_t ldy, cudaStream_t stream) {
  if (!fp8_gemm_supported(w)) return cudaErrorInvalidValue;
  if (T == 0) return cudaSuccess;
  if (!lt_) {
    lt_ = std::make_unique<Lt>();
    if (cublasLtCreate(&lt_->handle) != CUBLAS_STATUS_SUCCESS) {
      lt_.reset();
      return cudaErrorNotSupported;
    }
  }
  const Plan& p = lt_->plan(T, w.rows, w.cols, ldy, w.scales, s);
  if (!p.ok) return cudaErrorNotSupported;
  // The scale pointers change with every weight and activation buffer.
  if (!set(p.op, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, w.scales) || !set(p.op, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, s))
    return cudaErrorUnknown;
  void* ws = lt_->workspace.reserve(kWorkspaceBytes, stream);
  const float alpha = 1.0f, beta = 0.0f;
  const cublasStatus_t st = cublasLtMatmul(lt_->handle, p.op, &alpha, w.data, p.a, q, p.b, &beta, y, p.d, y, p.d,
                                           &p.algo, ws, kWorkspaceBytes, stream);
  if (st != CUBLAS_STATUS_SUCCESS) {
    log_error("cublasLtMatmul (block-scaled FP8, T={} N={} K={}) failed: status {}", T, w.rows, w.cols,
              static_cast<int>(st));
    return cudaErrorUnknown;
  }
  return cudaGetLastError();
}

}  // namespace m2::cuda
