// The dense BF16 tensor-core path (bf16_matmul.h): x split into bf16 hi + lo
// (launch_split_bf16, matmul.cu), then two cuBLASLt BF16 GEMMs with fp32
// accumulation and fp32 output: y = hi · Wᵀ, then y += lo · Wᵀ.
//
// Layout, as fp8_matmul.cpp: cuBLASLt sees the row-major y [T, N] = X [T, K]
// · Wᵀ as the column-major D [N, T] = op(A) · B with A = W stored
// column-major [K, N] (transa = T: W's rows are A's columns, ld K), B = hi
// or lo column-major [K, T] (ld K), D = y column-major [N, T] (ld ldy). The
// second GEMM reads y back as C (beta 1, C = D with the same layout: in
// place).
//
// Cost: W is read twice, once per GEMM. Accepted for the fp32 accuracy it
// buys (bf16_matmul.h): the lm_head (1.23 GB) at decode batches is
// memory-bound, and two reads at HBM speed (~0.6 ms on an H200) are expected
// well under the SIMT kernel's 3.2 ms at T = 64 (cuda_kernels_bench rows
// "lm_head tensor cores" and "lm_head [BF16 GEMM off]" measure both).
#include "backend/cuda/bf16_matmul.h"

#include <cublasLt.h>

#include <array>
#include <cstdlib>
#include <cstring>
#include <map>

#include "util/log.h"

namespace m2::cuda {

bool bf16_gemm_enabled_from_env() {
  const char* v = std::getenv("M2CPP_BF16_GEMM");
  if (!v || !*v || std::strcmp(v, "on") == 0) return true;
  if (std::strcmp(v, "off") == 0) return false;
  log_warn("M2CPP_BF16_GEMM={} is not one of on, off: using on", v);
  return true;
}

namespace {

constexpr size_t kWorkspaceBytes = size_t{32} << 20;
// What applies() guarantees of W, the split scratch (256) and y: the
// heuristic may only pick algorithms that work at this alignment (its
// default assumes 256-byte aligned buffers).
constexpr uint32_t kMinAlignBytes = 16;

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

template <class T>
bool set(cublasLtMatmulPreference_t pref, cublasLtMatmulPreferenceAttributes_t attr, const T& v) {
  return cublasLtMatmulPreferenceSetAttribute(pref, attr, &v, sizeof(v)) == CUBLAS_STATUS_SUCCESS;
}

}  // namespace

struct Bf16Matmul::Lt {
  cublasLtHandle_t handle = nullptr;
  DeviceBuffer workspace;
  std::map<std::array<int64_t, 4>, Plan> plans;  // (T, N, K, ldy)

  Lt() {
    const cublasStatus_t st = cublasLtCreate(&handle);
    if (st != CUBLAS_STATUS_SUCCESS) {
      handle = nullptr;
      log_warn("cublasLtCreate failed ({}): BF16 matmuls of {}+ tokens stay on the SIMT kernel",
               cublasLtGetStatusName(st), kBf16GemmMinTokens);
    }
  }
  ~Lt() {
    for (auto& [key, p] : plans) destroy(p);
    if (handle) cublasLtDestroy(handle);
  }

  // The plan for this shape, made on first use (host calls only: no GPU
  // work, so it may run while a graph is being recorded).
  const Plan& plan(int64_t T, int64_t N, int64_t K, int64_t ldy) {
    const std::array<int64_t, 4> key{T, N, K, ldy};
    auto it = plans.find(key);
    if (it != plans.end()) return it->second;
    Plan p;
    const cublasOperation_t transa = CUBLAS_OP_T, transb = CUBLAS_OP_N;
    cublasLtMatmulPreference_t pref = nullptr;
    bool ok = cublasLtMatmulDescCreate(&p.op, CUBLAS_COMPUTE_32F, CUDA_R_32F) == CUBLAS_STATUS_SUCCESS &&
              set(p.op, CUBLASLT_MATMUL_DESC_TRANSA, transa) && set(p.op, CUBLASLT_MATMUL_DESC_TRANSB, transb) &&
              cublasLtMatrixLayoutCreate(&p.a, CUDA_R_16BF, K, N, K) == CUBLAS_STATUS_SUCCESS &&
              cublasLtMatrixLayoutCreate(&p.b, CUDA_R_16BF, K, T, K) == CUBLAS_STATUS_SUCCESS &&
              cublasLtMatrixLayoutCreate(&p.d, CUDA_R_32F, N, T, ldy) == CUBLAS_STATUS_SUCCESS &&
              cublasLtMatmulPreferenceCreate(&pref) == CUBLAS_STATUS_SUCCESS &&
              set(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, kWorkspaceBytes);
    for (auto attr : {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
                      CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES})
      ok = ok && set(pref, attr, kMinAlignBytes);
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
      log_warn("cuBLASLt has no BF16 matmul for T={} N={} K={} (ldy {}): the SIMT kernel runs it", T, N, K, ldy);
    }
    return plans.emplace(key, p).first->second;
  }
};

Bf16Matmul::Bf16Matmul(bool enabled) : enabled_(enabled) {}
Bf16Matmul::~Bf16Matmul() = default;

bool Bf16Matmul::applies(const float* x, int64_t T, int64_t ldx, const DeviceWeight& w, const float* y,
                         int64_t ldy) const {
  auto aligned16 = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
  return enabled_ && w.dtype == DType::kBF16 && T >= kBf16GemmMinTokens && w.rows > 0 && w.cols > 0 &&
         w.cols % 8 == 0 && aligned16(x) && aligned16(w.data) && aligned16(y) && ldx % 4 == 0 && ldy % 4 == 0;
}

cudaError_t Bf16Matmul::run(const float* x, int64_t T, int64_t ldx, const DeviceWeight& w, float* y, int64_t ldy,
                            cudaStream_t stream) {
  if (!applies(x, T, ldx, w, y, ldy)) return cudaErrorInvalidValue;
  if (!lt_) lt_ = std::make_unique<Lt>();
  if (!lt_->handle) return cudaErrorNotSupported;
  const int64_t N = w.rows, K = w.cols;
  const Plan& p = lt_->plan(T, N, K, ldy);
  if (!p.ok) return cudaErrorNotSupported;

  const size_t half_bytes = sizeof(uint16_t) * static_cast<size_t>(T * K);
  ScratchLayout size(nullptr);
  size.take(half_bytes);
  size.take(half_bytes);
  ScratchLayout at(split_.reserve(size.size(), stream));
  auto* hi = reinterpret_cast<uint16_t*>(at.take(half_bytes));
  auto* lo = reinterpret_cast<uint16_t*>(at.take(half_bytes));
  void* ws = lt_->workspace.reserve(kWorkspaceBytes, stream);
  cudaError_t e = launch_split_bf16(x, T, K, ldx, hi, lo, stream);
  if (e != cudaSuccess) return e;

  const float one = 1.0f, zero = 0.0f;
  const struct {
    const uint16_t* b;
    const float* beta;
    const char* what;
  } passes[2] = {{hi, &zero, "y = hi * W^T"}, {lo, &one, "y += lo * W^T"}};
  for (const auto& pass : passes) {
    const cublasStatus_t st = cublasLtMatmul(lt_->handle, p.op, &one, w.data, p.a, pass.b, p.b, pass.beta, y, p.d, y,
                                             p.d, &p.algo, ws, kWorkspaceBytes, stream);
    if (st != CUBLAS_STATUS_SUCCESS) {
      log_error("cublasLtMatmul (BF16, {}, T={} N={} K={} ldy={}) failed: {}", pass.what, T, N, K, ldy,
                cublasLtGetStatusName(st));
      return cudaErrorUnknown;
    }
  }
  return cudaGetLastError();
}

}  // namespace m2::cuda
