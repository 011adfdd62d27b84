// Row-wise and element-wise ops: embedding gather, RMSNorm, residual add,
// row gather, KV-cache store. All memory-bound; one block per row where a
// row is the unit.
#include <algorithm>

#include "backend/cuda/runtime/common.cuh"
#include "backend/cuda/gemm/fp8_quant.cuh"
#include "backend/cuda/elementwise/elementwise.h"
#include "backend/cuda/runtime/device_kernels.h"

namespace m2::cuda {
namespace {

constexpr int kRowThreads = 256;

__global__ void embed_kernel(const void* __restrict__ table, DType dtype, int64_t rows, int64_t first_id, int64_t H,
                             const int32_t* __restrict__ ids, float* __restrict__ out) {
  grid_dependency_wait();
  allow_dependents();
  const int64_t row = ids[blockIdx.x] - first_id;
  float* o = out + blockIdx.x * H;
  if (row < 0 || row >= rows) {  // another rank's id
    for (int64_t j = threadIdx.x; j < H; j += blockDim.x) o[j] = 0.0f;
    return;
  }
  for (int64_t j = threadIdx.x; j < H; j += blockDim.x) o[j] = load_any(table, dtype, row * H + j);
}

// RMSNorm of one row per block (with `y`: x += y first, the residual add
// before each of a layer's norms, x written back). Statistics in fp64, like
// the CPU backend, so the scale is the same fp32 number whatever the
// summation order; then out = (x * inv) * w with no fused multiply-add,
// exactly as the CPU rounds. Rows of up to kRowThreads * 4 * kNormLoads
// floats (a multiple of 4, 16-byte aligned) are held in registers, every load
// of x, y and w issued before any is used (a loop of dependent loads made
// this a 9 us kernel at batch 1); other rows take the plain loop.
// kFp8Out: the block also writes out's FP8 copy out8 (n a multiple of 128,
// out 16-byte aligned: the launcher checks), quantising the very fp32 values
// it stores: held in registers, a 128-column group is one warp's float4s (32
// consecutive float4 columns, and kRowThreads is a multiple of 32), so each
// warp quantises its own group; the plain loop reads its stored row back.
// (A template parameter, so that the decode sizes, which never quantise, run
// the kernel they ran before.)
constexpr int kNormLoads = 4;

__device__ inline float4 mul4(float4 x, float inv, float4 w) {
  return make_float4(__fmul_rn(__fmul_rn(x.x, inv), w.x), __fmul_rn(__fmul_rn(x.y, inv), w.y),
                     __fmul_rn(__fmul_rn(x.z, inv), w.z), __fmul_rn(__fmul_rn(x.w, inv), w.w));
}

__device__ inline float inv_rms(double ss, int64_t n, float eps) {
  return static_cast<float>(1.0 / sqrt(ss / static_cast<double>(n) + static_cast<double>(eps)));
}

// (out may be x for the plain norm: each thread reads its elements before it
// writes them.) One block per row: gridDim.x = T, the rows of out8.
template <bool kFp8Out>
__global__ void __launch_bounds__(kRowThreads) rms_norm_kernel(float* x, const float* __restrict__ y, int64_t n,
                                                               const void* __restrict__ w, DType w_dtype, float eps,
                                                               float* out, Fp8Out out8) {
  __shared__ double scratch[kWarp];
  grid_dependency_wait();
  allow_dependents();
  float* xr = x + blockIdx.x * n;
  const float* yr = y ? y + blockIdx.x * n : nullptr;
  float* o = out + blockIdx.x * n;
  const int64_t n4 = n / 4;
  if (n % 4 == 0 && n4 <= kRowThreads * kNormLoads && reinterpret_cast<uintptr_t>(xr) % 16 == 0 &&
      reinterpret_cast<uintptr_t>(o) % 16 == 0 && (!yr || reinterpret_cast<uintptr_t>(yr) % 16 == 0) &&
      (w_dtype != DType::kF32 || reinterpret_cast<uintptr_t>(w) % 16 == 0) &&
      (w_dtype != DType::kBF16 || reinterpret_cast<uintptr_t>(w) % 8 == 0)) {
    float4 v[kNormLoads], wv[kNormLoads], yv[kNormLoads];
#pragma unroll
    for (int i = 0; i < kNormLoads; ++i) {
      const int64_t c = threadIdx.x + i * kRowThreads;
      if (c < n4) {
        v[i] = reinterpret_cast<const float4*>(xr)[c];
        if (yr) yv[i] = reinterpret_cast<const float4*>(yr)[c];
        wv[i] = load4_any(w, w_dtype, 4 * c);
      }
    }
    double ss = 0;
#pragma unroll
    for (int i = 0; i < kNormLoads; ++i) {
      const int64_t c = threadIdx.x + i * kRowThreads;
      if (c >= n4) continue;
      if (yr) {
        v[i] = make_float4(__fadd_rn(v[i].x, yv[i].x), __fadd_rn(v[i].y, yv[i].y), __fadd_rn(v[i].z, yv[i].z),
                           __fadd_rn(v[i].w, yv[i].w));
        reinterpret_cast<float4*>(xr)[c] = v[i];
      }
      ss += static_cast<double>(v[i].x) * v[i].x + static_cast<double>(v[i].y) * v[i].y +
            static_cast<double>(v[i].z) * v[i].z + static_cast<double>(v[i].w) * v[i].w;
    }
    const float inv = inv_rms(block_sum(ss, scratch), n, eps);
#pragma unroll
    for (int i = 0; i < kNormLoads; ++i) {
      const int64_t c = threadIdx.x + i * kRowThreads;
      if (c >= n4) continue;  // warp-uniform when n % 128 == 0
      const float4 r = mul4(v[i], inv, wv[i]);
      reinterpret_cast<float4*>(o)[c] = r;
      if constexpr (kFp8Out) quantize_store_group128(r, blockIdx.x, c / kWarp, gridDim.x, n, out8.q, out8.s);
    }
    return;
  }
  double ss = 0;
  for (int64_t j = threadIdx.x; j < n; j += blockDim.x) {
    const float v = yr ? __fadd_rn(xr[j], yr[j]) : xr[j];
    if (yr) xr[j] = v;  // each thread re-reads only the elements it wrote
    ss += static_cast<double>(v) * v;
  }
  const float inv = inv_rms(block_sum(ss, scratch), n, eps);
  for (int64_t j = threadIdx.x; j < n; j += blockDim.x) o[j] = __fmul_rn(__fmul_rn(xr[j], inv), load_any(w, w_dtype, j));
  if constexpr (kFp8Out) {
    __syncthreads();  // the block's stores to o are visible to all its threads after this
    const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
    for (int64_t kb = warp; kb < n / kFp8Block; kb += blockDim.x / kWarp)
      quantize_store_group128(reinterpret_cast<const float4*>(o + kb * kFp8Block)[lane], blockIdx.x, kb, gridDim.x, n,
                              out8.q, out8.s);
  }
}

__global__ void add_kernel(float* __restrict__ x, const float* __restrict__ y, int64_t n) {
  grid_dependency_wait();
  allow_dependents();
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    x[i] += y[i];
}

__global__ void gather_rows_kernel(const float* __restrict__ x, int64_t cols, const int64_t* __restrict__ rows,
                                   float* __restrict__ out) {
  const float* src = x + rows[blockIdx.x] * cols;
  float* dst = out + blockIdx.x * cols;
  for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) dst[j] = src[j];
}

template <DType T>
__global__ void kv_store_kernel(const float* __restrict__ k, const float* __restrict__ v,
                                const int64_t* __restrict__ slots, int64_t row_elems, void* k_cache, void* v_cache) {
  const int64_t dst = slots[blockIdx.x] * row_elems;
  const float* kr = k + blockIdx.x * row_elems;
  const float* vr = v + blockIdx.x * row_elems;
  for (int64_t j = threadIdx.x; j < row_elems; j += blockDim.x) {
    Stored<T>::store1(k_cache, dst + j, kr[j]);
    Stored<T>::store1(v_cache, dst + j, vr[j]);
  }
}

// FP8 rows: one warp per (token, K or V, kv head), store_fp8_head.
__global__ void kv_store_fp8_kernel(const float* __restrict__ k, const float* __restrict__ v,
                                    const int64_t* __restrict__ slots, int kv_heads, int head_dim, uint8_t* k_cache,
                                    uint8_t* v_cache, float* k_scales, float* v_scales) {
  const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
  const int64_t row_elems = static_cast<int64_t>(kv_heads) * head_dim;
  const int64_t slot = slots[blockIdx.x];
  for (int job = warp; job < 2 * kv_heads; job += blockDim.x / kWarp) {
    const bool is_v = job >= kv_heads;
    const int h = is_v ? job - kv_heads : job;
    const int64_t off = static_cast<int64_t>(h) * head_dim;
    store_fp8_head((is_v ? v : k) + blockIdx.x * row_elems + off, head_dim,
                   (is_v ? v_cache : k_cache) + slot * row_elems + off, (is_v ? v_scales : k_scales) + slot * kv_heads + h,
                   lane);
  }
}

}  // namespace

cudaError_t kernels_loadable(int* arch) {
  cudaFuncAttributes attr;
  const cudaError_t e = cudaFuncGetAttributes(&attr, add_kernel);
  *arch = e == cudaSuccess ? attr.ptxVersion : 0;  // the virtual architecture the code was built from
  return e;
}

cudaError_t launch_embed(const void* table, DType dtype, int64_t rows, int64_t first_id, int64_t H, const int32_t* ids,
                         int64_t T, float* out, cudaStream_t stream) {
  return launch_pdl(embed_kernel, static_cast<unsigned>(T), kRowThreads, 0, stream, table, dtype, rows, first_id, H,
                    ids, out);
}

namespace {
// rms_norm_kernel with y null (plain norm) or not (x += y first).
cudaError_t launch_norm(float* x, const float* y, int64_t rows, int64_t n, const void* w, DType w_dtype, float eps,
                        float* out, Fp8Out out8, cudaStream_t stream) {
  if (!out8.q)
    return launch_pdl(rms_norm_kernel<false>, static_cast<unsigned>(rows), kRowThreads, 0, stream, x, y, n, w, w_dtype,
                      eps, out, out8);
  if (n % kFp8Block != 0 || !out8.s || reinterpret_cast<uintptr_t>(out) % 16 != 0 ||
      reinterpret_cast<uintptr_t>(out8.q) % 4 != 0)
    return cudaErrorInvalidValue;
  return launch_pdl(rms_norm_kernel<true>, static_cast<unsigned>(rows), kRowThreads, 0, stream, x, y, n, w, w_dtype,
                    eps, out, out8);
}
}  // namespace

cudaError_t launch_rms_norm(const float* x, int64_t rows, int64_t n, const void* w, DType w_dtype, float eps,
                            float* out, Fp8Out out8, cudaStream_t stream) {
  // x is only read (y is null).
  return launch_norm(const_cast<float*>(x), nullptr, rows, n, w, w_dtype, eps, out, out8, stream);
}

cudaError_t launch_add_rms_norm(float* x, const float* y, int64_t rows, int64_t n, const void* w, DType w_dtype,
                                float eps, float* out, Fp8Out out8, cudaStream_t stream) {
  return launch_norm(x, y, rows, n, w, w_dtype, eps, out, out8, stream);
}

cudaError_t launch_add(float* x, const float* y, int64_t n, cudaStream_t stream) {
  const int64_t blocks = std::min<int64_t>(ceil_div(n, kRowThreads), 4096);
  return launch_pdl(add_kernel, static_cast<unsigned>(blocks), kRowThreads, 0, stream, x, y, n);
}

cudaError_t launch_gather_rows(const float* x, int64_t cols, const int64_t* rows, int64_t n_rows, float* out,
                               cudaStream_t stream) {
  gather_rows_kernel<<<static_cast<unsigned>(n_rows), kRowThreads, 0, stream>>>(x, cols, rows, out);
  return cudaGetLastError();
}

cudaError_t launch_kv_store(const float* k, const float* v, int64_t T, const int64_t* slots, int kv_heads,
                            int head_dim, void* k_cache, void* v_cache, float* k_scales, float* v_scales, DType dtype,
                            cudaStream_t stream) {
  const unsigned blocks = static_cast<unsigned>(T);
  const int64_t row_elems = static_cast<int64_t>(kv_heads) * head_dim;
  if (dtype == DType::kF8E4M3) {
    if (!k_scales || !v_scales) return cudaErrorInvalidValue;
    kv_store_fp8_kernel<<<blocks, kRowThreads, 0, stream>>>(k, v, slots, kv_heads, head_dim,
                                                            static_cast<uint8_t*>(k_cache),
                                                            static_cast<uint8_t*>(v_cache), k_scales, v_scales);
  } else if (dtype == DType::kBF16) {
    kv_store_kernel<DType::kBF16><<<blocks, kRowThreads, 0, stream>>>(k, v, slots, row_elems, k_cache, v_cache);
  } else if (dtype == DType::kF32) {
    kv_store_kernel<DType::kF32><<<blocks, kRowThreads, 0, stream>>>(k, v, slots, row_elems, k_cache, v_cache);
  } else {
    return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

}  // namespace m2::cuda
