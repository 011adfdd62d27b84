// The GPU's own ceilings, measured in the same run as a benchmark so that
// every result can be printed as a fraction of them:
//   - memory: a device-to-device copy of a buffer much larger than L2,
//     counting bytes read plus bytes written (the convention of the
//     project's H200 notes, about 4.3 TB/s there);
//   - matrix: cuBLASLt's dense 8192^3 GEMM on random data, BF16 and FP8 e4m3
//     (per-tensor scales), fp32 accumulation, BF16 output;
// and a delay kernel that lets benchmarks time kernels without the host's
// launch overhead.
#include <cublasLt.h>

#include <algorithm>

#include "backend/cuda/runtime/common.cuh"
#include "backend/cuda/runtime/roofline.h"

namespace m2::cuda {
namespace {

// Random finite values: bf16 in ±[2^-7, 2^-5), or e4m3 codes without NaN.
__global__ void fill_random_kernel(uint8_t* p, size_t n, bool fp8) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    uint32_t h = static_cast<uint32_t>(i) * 0x9e3779b1u;
    h ^= h >> 15, h *= 0x85ebca77u, h ^= h >> 13;
    if (fp8) {
      p[i] = static_cast<uint8_t>(h) & 0xbf;  // exponent < 8: never 0x7f / 0xff
    } else if (i % 2 == 0) {
      reinterpret_cast<uint16_t*>(p)[i / 2] = static_cast<uint16_t>((h & 0x807f) | 0x3c00);
    }
  }
}

__global__ void delay_kernel(uint64_t ns) {
  uint64_t start, now;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  do {
    __nanosleep(1000);
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
  } while (now - start < ns);
}

// Elapsed ms of `reps` calls of f after two warm-up calls (events on stream 0).
template <class F>
cudaError_t time_ms(int reps, F f, float* ms) {
  cudaEvent_t a, b;
  cudaError_t e = cudaEventCreate(&a);
  if (e == cudaSuccess) e = cudaEventCreate(&b);
  for (int i = 0; i < 2 && e == cudaSuccess; ++i) e = f();
  if (e == cudaSuccess) e = cudaEventRecord(a);
  for (int i = 0; i < reps && e == cudaSuccess; ++i) e = f();
  if (e == cudaSuccess) e = cudaEventRecord(b);
  if (e == cudaSuccess) e = cudaEventSynchronize(b);
  if (e == cudaSuccess) e = cudaEventElapsedTime(ms, a, b);
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  return e;
}

}  // namespace

cudaError_t launch_gpu_delay(cudaStream_t stream, double seconds) {
  delay_kernel<<<1, 1, 0, stream>>>(static_cast<uint64_t>(seconds * 1e9));
  return cudaGetLastError();
}

cudaError_t measure_copy_bandwidth(size_t bytes, double* bytes_per_second) {
  void* a = nullptr;
  void* b = nullptr;
  cudaError_t e = cudaMalloc(&a, bytes);
  if (e == cudaSuccess) e = cudaMalloc(&b, bytes);
  if (e == cudaSuccess) e = cudaMemset(a, 0x5a, bytes);  // not zeros: the copy must move real data
  float ms = 0;
  const int reps = 5;
  if (e == cudaSuccess)
    e = time_ms(reps, [&] { return cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice); }, &ms);
  *bytes_per_second = e == cudaSuccess ? 2.0 * static_cast<double>(bytes) * reps / (ms * 1e-3) : 0.0;
  if (a) cudaFree(a);
  if (b) cudaFree(b);
  return e;
}

cudaError_t measure_gemm_flops(DType input, double* flops) {
  *flops = 0;
  const int64_t n = 8192;
  const bool fp8 = input == DType::kF8E4M3;
  const size_t in_bytes = static_cast<size_t>(n * n) * (fp8 ? 1 : 2);
  const size_t workspace_bytes = size_t{64} << 20;
  void *A = nullptr, *B = nullptr, *D = nullptr, *ws = nullptr;
  cublasLtHandle_t handle = nullptr;
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t la = nullptr, lb = nullptr, ld = nullptr;
  cublasLtMatmulPreference_t pref = nullptr;
  cudaError_t e = cudaMalloc(&A, in_bytes);
  if (e == cudaSuccess) e = cudaMalloc(&B, in_bytes);
  if (e == cudaSuccess) e = cudaMalloc(&D, static_cast<size_t>(n * n) * 2);
  if (e == cudaSuccess) e = cudaMalloc(&ws, workspace_bytes);
  if (e == cudaSuccess) {
    fill_random_kernel<<<1024, 256>>>(static_cast<uint8_t*>(A), in_bytes, fp8);
    fill_random_kernel<<<1024, 256>>>(static_cast<uint8_t*>(B), in_bytes, fp8);
    e = cudaGetLastError();
  }
  // D [n, n] = Aᵀ B, column-major, A and B stored [k, n] ("TN", the layout FP8 needs).
  const cudaDataType_t in_type = fp8 ? CUDA_R_8F_E4M3 : CUDA_R_16BF;
  const cublasOperation_t transa = CUBLAS_OP_T;
  bool ok = e == cudaSuccess && cublasLtCreate(&handle) == CUBLAS_STATUS_SUCCESS &&
            cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F) == CUBLAS_STATUS_SUCCESS &&
            cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &transa, sizeof(transa)) ==
                CUBLAS_STATUS_SUCCESS &&
            cublasLtMatrixLayoutCreate(&la, in_type, n, n, n) == CUBLAS_STATUS_SUCCESS &&
            cublasLtMatrixLayoutCreate(&lb, in_type, n, n, n) == CUBLAS_STATUS_SUCCESS &&
            cublasLtMatrixLayoutCreate(&ld, CUDA_R_16BF, n, n, n) == CUBLAS_STATUS_SUCCESS &&
            cublasLtMatmulPreferenceCreate(&pref) == CUBLAS_STATUS_SUCCESS &&
            cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace_bytes,
                                                 sizeof(workspace_bytes)) == CUBLAS_STATUS_SUCCESS;
  cublasLtMatmulHeuristicResult_t heur{};
  int found = 0;
  ok = ok && cublasLtMatmulAlgoGetHeuristic(handle, op, la, lb, ld, ld, pref, 1, &heur, &found) ==
                 CUBLAS_STATUS_SUCCESS && found > 0;
  if (ok) {
    const float alpha = 1.0f, beta = 0.0f;
    float ms = 0;
    const int reps = 10;
    e = time_ms(reps, [&] {
      return cublasLtMatmul(handle, op, &alpha, A, la, B, lb, &beta, D, ld, D, ld, &heur.algo, ws, workspace_bytes,
                            nullptr) == CUBLAS_STATUS_SUCCESS ? cudaSuccess : cudaErrorUnknown;
    }, &ms);
    if (e == cudaSuccess) *flops = 2.0 * n * n * n * reps / (ms * 1e-3);
  } else if (e == cudaSuccess) {
    e = cudaErrorNotSupported;
  }
  if (pref) cublasLtMatmulPreferenceDestroy(pref);
  if (ld) cublasLtMatrixLayoutDestroy(ld);
  if (lb) cublasLtMatrixLayoutDestroy(lb);
  if (la) cublasLtMatrixLayoutDestroy(la);
  if (op) cublasLtMatmulDescDestroy(op);
  if (handle) cublasLtDestroy(handle);
  for (void* p : {A, B, D, ws})
    if (p) cudaFree(p);
  return e;
}

}  // namespace m2::cuda
