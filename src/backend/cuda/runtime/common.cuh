// Device helpers shared by the CUDA kernels: stored weight dtypes decoded to
// fp32 in registers, streaming loads, warp reductions. Only .cu files include
// this.
#pragma once

#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "backend/cuda/runtime/device_kernels.h"
#include "tensor/dtype.h"

namespace m2::cuda {

constexpr int kWarp = 32;
constexpr int kScaleBlock = kFp8Block;  // FP8 weight_scale_inv covers 128 x 128 weights

// Stored elements <-> fp32: kPer16 values per 16-byte load; load1 reads one
// element, decode (BF16, F32: the KV-cache types) a 16-byte chunk, store1
// writes one with round-to-nearest-even.
template <DType T>
struct Stored;

template <>
struct Stored<DType::kF8E4M3> {
  static constexpr int kPer16 = 16;
  // e4m3 -> f16 (exact; one instruction per pair on sm_89+) -> f32. Vector
  // decoding is decode4() in gemv.cuh.
  __device__ static float load1(const void* p, int64_t i) {
    const __half_raw r = __nv_cvt_fp8_to_halfraw(static_cast<const __nv_fp8_storage_t*>(p)[i], __NV_E4M3);
    return __half2float(__half(r));
  }
};

template <>
struct Stored<DType::kBF16> {
  static constexpr int kPer16 = 8;
  __device__ static void decode(uint4 v, float (&out)[8]) {
    const uint32_t w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      out[2 * i] = __uint_as_float(w[i] << 16);
      out[2 * i + 1] = __uint_as_float(w[i] & 0xffff0000u);
    }
  }
  __device__ static float load1(const void* p, int64_t i) {
    return __uint_as_float(static_cast<uint32_t>(static_cast<const uint16_t*>(p)[i]) << 16);
  }
  __device__ static void store1(void* p, int64_t i, float v) {
    static_cast<__nv_bfloat16*>(p)[i] = __float2bfloat16_rn(v);
  }
};

template <>
struct Stored<DType::kF16> {
  static constexpr int kPer16 = 8;
  __device__ static float load1(const void* p, int64_t i) { return __half2float(static_cast<const __half*>(p)[i]); }
};

template <>
struct Stored<DType::kF32> {
  static constexpr int kPer16 = 4;
  __device__ static void decode(uint4 v, float (&out)[4]) {
    out[0] = __uint_as_float(v.x), out[1] = __uint_as_float(v.y);
    out[2] = __uint_as_float(v.z), out[3] = __uint_as_float(v.w);
  }
  __device__ static float load1(const void* p, int64_t i) { return static_cast<const float*>(p)[i]; }
  __device__ static void store1(void* p, int64_t i, float v) { static_cast<float*>(p)[i] = v; }
};

// Element i of a small float tensor (norm weights, biases, embeddings) whose
// dtype is only known at run time.
__device__ inline float load_any(const void* p, DType t, int64_t i) {
  switch (t) {
    case DType::kBF16: return Stored<DType::kBF16>::load1(p, i);
    case DType::kF16: return Stored<DType::kF16>::load1(p, i);
    case DType::kF8E4M3: return Stored<DType::kF8E4M3>::load1(p, i);
    default: return Stored<DType::kF32>::load1(p, i);
  }
}

// Values i..i+3 (i a multiple of 4; p 16-byte aligned for F32, 8 for BF16).
__device__ inline float4 load4_any(const void* p, DType t, int64_t i) {
  if (t == DType::kF32) return *reinterpret_cast<const float4*>(static_cast<const float*>(p) + i);
  if (t == DType::kBF16) {
    const uint2 w = *reinterpret_cast<const uint2*>(static_cast<const uint16_t*>(p) + i);
    return make_float4(__uint_as_float(w.x << 16), __uint_as_float(w.x & 0xffff0000u), __uint_as_float(w.y << 16),
                       __uint_as_float(w.y & 0xffff0000u));
  }
  return make_float4(load_any(p, t, i), load_any(p, t, i + 1), load_any(p, t, i + 2), load_any(p, t, i + 3));
}

// 16 bytes of data read once (weights): bypass L1, prefetch 256 B into L2.
__device__ inline uint4 load_stream(const void* p) {
  uint4 v;
  asm("ld.global.nc.L1::no_allocate.L2::256B.v4.u32 {%0, %1, %2, %3}, [%4];"
      : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
      : "l"(p));
  return v;
}

// load_stream as an ordinary load, not a read-only one (ld.global.nc), for
// kernels that issue their first weight loads and then stage activations
// behind a barrier: ptxas moved read-only loads below the staging's copies,
// wait and barrier (the kernel then paid the staging's round trip, then the
// weights'); ordinary loads stay above a barrier (moe_decode.cu,
// moe_decode_wgmma.cu).
__device__ inline uint4 load_weights(const void* p) {
  uint4 v;
  asm volatile("ld.global.L1::no_allocate.L2::256B.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p));
  return v;
}

__device__ inline float warp_sum(float v) {
#pragma unroll
  for (int o = kWarp / 2; o > 0; o /= 2) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

__device__ inline float warp_max(float v) {
#pragma unroll
  for (int o = kWarp / 2; o > 0; o /= 2) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

__device__ inline double warp_sum(double v) {
#pragma unroll
  for (int o = kWarp / 2; o > 0; o /= 2) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// One kv head's row of an FP8 cache, written by one warp (`lane` its lane):
// scale = amax / 448 (1 for an all-zero head) to *scale and codes
// e4m3(x / scale) with IEEE division and RNE, saturating conversion, to
// dst [head_dim]. The CPU backend's kv_store bit for bit (fmaxf, like
// std::max there, skips NaN in the amax; the max is exact, so the order of
// the reduction does not matter). x may be in global or shared memory. Both
// FP8 cache writers (kv_store_fp8_kernel, the fused QK kernel) call this.
__device__ inline void store_fp8_head(const float* x, int head_dim, uint8_t* dst, float* scale, int lane) {
  float amax = 0.0f;
  for (int d = lane; d < head_dim; d += kWarp) amax = fmaxf(amax, fabsf(x[d]));
  amax = warp_max(amax);
  const float sc = amax > 0.0f ? __fdiv_rn(amax, 448.0f) : 1.0f;
  if (lane == 0) *scale = sc;
  for (int d = lane; d < head_dim; d += kWarp)
    dst[d] = __nv_cvt_float_to_fp8(__fdiv_rn(x[d], sc), __NV_SATFINITE, __NV_E4M3);
}

// Sum over the block (blockDim.x a multiple of 32, at most 1024); every
// thread gets the result. `scratch` holds 32 doubles.
__device__ inline double block_sum(double v, double* scratch) {
  const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp, warps = blockDim.x / kWarp;
  v = warp_sum(v);
  __syncthreads();  // scratch may still be read by a previous call
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  v = lane < warps ? scratch[lane] : 0.0;
  return warp_sum(v);
}

// Two block sums at once (one pair of barriers): each result as block_sum
// would give it. `scratch` holds 64 doubles.
__device__ inline void block_sum2(double& a, double& b, double* scratch) {
  const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp, warps = blockDim.x / kWarp;
  a = warp_sum(a), b = warp_sum(b);
  __syncthreads();  // scratch may still be read by a previous call
  if (lane == 0) scratch[warp] = a, scratch[kWarp + warp] = b;
  __syncthreads();
  a = lane < warps ? scratch[lane] : 0.0, b = lane < warps ? scratch[kWarp + lane] : 0.0;
  a = warp_sum(a), b = warp_sum(b);
}

// For blocks that each publish a part of a result and let the last one
// finish it: every thread of the block calls this after writing its part;
// true in every thread of the block that arrives `arrivals`-th at `counter`
// (which the caller zeroes again when done). The fences make the other
// blocks' parts visible to the last one (read them through L2: __ldcg).
__device__ __forceinline__ bool last_to_arrive(unsigned* counter, unsigned arrivals) {
  __shared__ bool last;
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0) last = atomicAdd(counter, 1u) == arrivals - 1;
  __syncthreads();
  if (last) __threadfence();
  return last;
}

__host__ __device__ constexpr int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// The paged KV cache slot of a sequence's key through its block table; a
// shift and a mask when the block size is a power of two (the tensor-core
// attention kernels' tile gathers issue many per thread).
struct PagedSlots {
  const int32_t* table;
  int bs, shift;
  bool pow2;
  __device__ PagedSlots(const int32_t* block_table, int block_size) {
    table = block_table, bs = block_size, shift = __ffs(block_size) - 1, pow2 = (block_size & (block_size - 1)) == 0;
  }
  __device__ int64_t operator()(int key) const {
    if (pow2) return (static_cast<int64_t>(table[key >> shift]) << shift) | (key & (bs - 1));
    return static_cast<int64_t>(table[key / bs]) * bs + key % bs;
  }
};

// Dynamic shared memory a kernel may ask for (Hopper allows 227 KiB a block).
constexpr size_t kMaxDynamicSmem = 200 * 1024;

// Lets `kernel` take `bytes` of dynamic shared memory on the current device.
// The default limit (48 KiB) covers dynamic *plus static* shared memory, so
// the opt-in is needed well below 48 KiB of dynamic memory when the kernel
// also declares static arrays: it is set for anything above 16 KiB, once per
// kernel, device and size (a cudaFuncSetAttribute per launch would cost
// microseconds). The limit only ever grows (grant_dynamic_smem), so what this
// thread's cache says it was granted stays true whatever other threads ask.
template <class Kernel>
cudaError_t allow_dynamic_smem(Kernel* kernel, size_t bytes) {
  if (bytes <= 16 * 1024) return cudaSuccess;
  if (bytes > kMaxDynamicSmem) return cudaErrorInvalidValue;
  struct Granted {
    const void* kernel;
    int device;
    size_t bytes;
  };
  thread_local Granted granted[32] = {};  // a few dozen kernel instantiations exist
  const void* key = reinterpret_cast<const void*>(kernel);
  int device = 0;
  cudaGetDevice(&device);
  int slot = 0;
  for (; slot < 32 && granted[slot].kernel && (granted[slot].kernel != key || granted[slot].device != device); ++slot) {
  }
  if (slot < 32 && granted[slot].kernel == key && granted[slot].bytes >= bytes) return cudaSuccess;
  const cudaError_t e = grant_dynamic_smem(key, bytes);
  if (e == cudaSuccess && slot < 32) granted[slot] = {key, device, bytes};
  return e;
}

// ---- Programmatic dependent launch (Hopper) ----------------------------------
// A kernel started with launch_pdl may begin while the kernel before it on the
// stream is still finishing: it can warm up (prefetch its weights, which no
// kernel writes) but must call grid_dependency_wait() before it reads what
// earlier kernels wrote or writes anything. allow_dependents() lets the next
// kernel start early (it still waits for this one to complete before using
// its results). Both are no-ops for a kernel launched the ordinary way.
__device__ inline void grid_dependency_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}
__device__ inline void allow_dependents() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}
// Asks L2 to fetch [p, p + bytes) (16-byte aligned, bytes a multiple of 16)
// without waiting for it: weights a kernel is about to stream.
__device__ inline void prefetch_l2(const void* p, uint32_t bytes) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(p), "r"(bytes) : "memory");
#endif
}


// kernel<<<grid, block, smem, stream>>>(args...) with programmatic stream
// serialisation: see grid_dependency_wait().
template <class... Params, class... Args>
cudaError_t launch_pdl(void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem, cudaStream_t stream,
                       Args&&... args) {
  cudaLaunchConfig_t config{};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = smem;
  config.stream = stream;
  cudaLaunchAttribute attribute[1];
  attribute[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attribute[0].val.programmaticStreamSerializationAllowed = current_device_has_pdl() ? 1 : 0;
  config.attrs = attribute;
  config.numAttrs = 1;
  return cudaLaunchKernelEx(&config, kernel, std::forward<Args>(args)...);
}

}  // namespace m2::cuda
