// The dense FP8 path of a backend: activation quantisation into scratch
// (unless the activation's producer wrote it quantised), then our mma.sync
// kernel (fp8_gemm.cu) or cuBLASLt's block-scaled FP8 matmul, as the plan
// says (gemm/matmul_plan.h).
//
// cuBLASLt's view of the product: cublaslt_plans.h (the "TN" layout FP8
// needs, A = the weights, B = the activations). Scales: A (weights)
// CUBLASLT_MATMUL_MATRIX_SCALE_BLK128x128_32F, one fp32 per 128 x 128 block,
// the [N / 128, K / 128] row-major grid of the checkpoint; B (activations)
// CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F, one fp32 per 128 consecutive k of
// each column, stored with the outer dimension contiguous (s[kb * T + t]),
// which is what launch_quantize_fp8 writes (PyTorch's _scaled_mm checks the
// same layouts for its 1x128 / 128x128 cuBLASLt path).
#include <cublasLt.h>

#include <cstdlib>
#include <cstring>

#include "backend/cuda/gemm/cublaslt_plans.h"
#include "backend/cuda/gemm/fp8_gemm.h"
#include "backend/cuda/gemm/matmul_plan.h"
#include "util/log.h"

namespace m2::cuda {

Fp8Matmul::Fp8Matmul(Fp8GemmMode mode) : mode_(mode) {}
Fp8Matmul::~Fp8Matmul() = default;

LtPlans& Fp8Matmul::lt() {
  if (!lt_)
    lt_ = std::make_unique<LtPlans>(LtPlanSpec{CUDA_R_8F_E4M3, CUDA_R_8F_E4M3, 0, "block-scaled FP8", "our FP8 kernel"});
  return *lt_;
}

void Fp8Matmul::reserve(int64_t elems, cudaStream_t stream) {
  if (elems <= 0) return;
  const size_t scales = sizeof(float) * static_cast<size_t>(elems / 128);
  q_.reserve_up_front(static_cast<size_t>(elems), stream);
  s_.reserve_up_front(scales, stream);
  s_main_.reserve_up_front(scales, stream);
  if (mode_ == Fp8GemmMode::kCublasLt) lt().reserve_workspace(stream);
}

cudaError_t Fp8Matmul::run(const MatmulPlan& plan, const float* x, int64_t T, int64_t ldx, const DeviceWeight& w,
                           float* y, int64_t ldy, cudaStream_t stream) {
  const int64_t K = w.cols;
  auto* q = static_cast<uint8_t*>(q_.reserve(static_cast<size_t>(T * K), stream));
  auto* s = static_cast<float*>(s_.reserve(sizeof(float) * static_cast<size_t>(T * (K / 128)), stream));
  const cudaError_t e = launch_quantize_fp8(x, T, K, ldx, q, s, stream);
  if (e != cudaSuccess) return e;
  return run_quantized(plan, q, s, T, w, y, ldy, stream);
}

cudaError_t Fp8Matmul::run_quantized(const MatmulPlan& plan, const uint8_t* q, const float* s, int64_t T,
                                     const DeviceWeight& w, float* y, int64_t ldy, cudaStream_t stream) {
  if (plan.kernel == MatmulKernel::kFp8CublasLt) {
    const int64_t main = plan.lt_rows;
    if (main == T) {
      const cudaError_t e = run_cublaslt(q, s, T, w, y, ldy, stream);
      if (e != cudaErrorNotSupported) return e;
    } else {
      // Rows [0, main) on cuBLASLt, whose scales must be [K / 128, main]
      // (s is [K / 128, T]); rows [main, T) on our kernel, reading s in place.
      const int64_t kb = w.cols / 128;
      auto* sm = static_cast<float*>(s_main_.reserve(sizeof(float) * static_cast<size_t>(kb * main), stream));
      cudaError_t e = cudaMemcpy2DAsync(sm, sizeof(float) * main, s, sizeof(float) * T, sizeof(float) * main, kb,
                                        cudaMemcpyDeviceToDevice, stream);
      if (e != cudaSuccess) return e;
      e = run_cublaslt(q, sm, main, w, y, ldy, stream);
      if (e == cudaSuccess)
        return launch_fp8_gemm(q + main * w.cols, s + main, T - main, w, y + main * ldy, ldy, stream, T);
      if (e != cudaErrorNotSupported) return e;
    }
  } else if (plan.kernel != MatmulKernel::kFp8Own) {
    return cudaErrorInvalidValue;
  }
  return launch_fp8_gemm(q, s, T, w, y, ldy, stream);
}

cudaError_t Fp8Matmul::run_cublaslt(const uint8_t* q, const float* s, int64_t T, const DeviceWeight& w, float* y,
                                    int64_t ldy, cudaStream_t stream) {
  if (!fp8_gemm_supported(w)) return cudaErrorInvalidValue;
  if (T == 0) return cudaSuccess;
  lt();
  LtPlans& lt = *lt_;
  if (!lt.handle()) return cudaErrorNotSupported;
  // A new plan is made with this call's scale pointers; they change with
  // every weight and activation buffer, so each call sets them again.
  auto scales = [&](cublasLtMatmulDesc_t op) {
    return lt_set(op, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, w.scales) &&
           lt_set(op, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, s);
  };
  const LtPlan& p = lt.plan(T, w.rows, w.cols, ldy, [&](cublasLtMatmulDesc_t op) {
    const int32_t a_mode = CUBLASLT_MATMUL_MATRIX_SCALE_BLK128x128_32F, b_mode = CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F;
    return lt_set(op, CUBLASLT_MATMUL_DESC_A_SCALE_MODE, a_mode) &&
           lt_set(op, CUBLASLT_MATMUL_DESC_B_SCALE_MODE, b_mode) && scales(op);
  });
  if (!p.ok) return cudaErrorNotSupported;
  if (!scales(p.op)) return cudaErrorUnknown;
  void* ws = lt.workspace(stream);
  const float alpha = 1.0f, beta = 0.0f;
  const cublasStatus_t st = cublasLtMatmul(lt.handle(), p.op, &alpha, w.data, p.a, q, p.b, &beta, y, p.d, y, p.d,
                                           &p.algo, ws, LtPlans::kWorkspaceBytes, stream);
  if (st != CUBLAS_STATUS_SUCCESS) {
    log_error("cublasLtMatmul (block-scaled FP8, T={} N={} K={}) failed: status {}", T, w.rows, w.cols,
              static_cast<int>(st));
    return cudaErrorUnknown;
  }
  return cudaGetLastError();
}

}  // namespace m2::cuda
