// Hopper warpgroup MMA (wgmma, sm_90a only) for products with few tokens:
// A = 64 weight rows x 16 f16 columns in registers, B = 8 activation columns
// x 16 f16 in shared memory, D = 64 x 8 fp32 in registers. Issued by the 4
// warps of a warpgroup together (128 threads starting at a multiple of 128),
// all converged.
//
// Register fragments (PTX ISA, wgmma .m64nNk16 with 16-bit A; CUTLASS's
// ALayout_64x16 and CLayout_64x8 say the same): warp w of the warpgroup holds
// rows 16 w .. 16 w + 15; lane = 4 g + q.
//   A: a0 = row 16 w + g, columns 2 q, 2 q + 1 (low half first); a1 = row +
//      8, same columns; a2 = row, columns 8 + 2 q, 9 + 2 q; a3 = row + 8.
//   D: d0, d1 = row 16 w + g, columns 2 q, 2 q + 1; d2, d3 = row + 8.
// B without swizzle ("interleave"), K-major: core matrices of 8 columns x 16
// bytes (8 f16 along k; 128 contiguous bytes, column n at byte 16 n); the two
// core matrices of a k16 step lie `k_stride` bytes apart. The descriptor also
// names the stride between core matrices along N; with 8 columns there is
// one, and both fields get k_stride. (Measured with 16 columns on the H200,
// branch gemv-wgmma: the leading-dimension offset, bits 16-29, is the k
// stride and the stride offset, bits 32-45, the stride between groups of 8
// columns, as CUTLASS's canonical K-major layout says.)
#pragma once

#include <cstdint>

#include "backend/cuda/runtime/async_copy.cuh"

namespace m2::cuda {

#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define M2CPP_DEVICE_WGMMA 1
#endif

// Descriptor of a B tile at `smem` (16-byte aligned) in the layout above.
__device__ inline uint64_t wgmma_desc_b(const void* smem, uint32_t k_stride) {
  const uint64_t addr = (smem_addr(smem) & 0x3FFFF) >> 4, stride = (k_stride & 0x3FFFF) >> 4;
  return addr | stride << 16 | stride << 32;  // layout type 0 (no swizzle), base offset 0
}

__device__ inline void wgmma_fence() {
#if defined(M2CPP_DEVICE_WGMMA)
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#endif
}
__device__ inline void wgmma_commit() {
#if defined(M2CPP_DEVICE_WGMMA)
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
#endif
}
// Waits until at most N committed groups of this warpgroup are in flight.
template <int N>
__device__ inline void wgmma_wait() {
#if defined(M2CPP_DEVICE_WGMMA)
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
#endif
}
// Keeps the compiler from moving accesses of v across a wgmma wait (the
// asynchronous MMA writes it behind the compiler's back).
__device__ inline void wgmma_hold(float& v) { asm volatile("" : "+f"(v)::"memory"); }

// d = (accumulate ? d : 0) + A · B (m64n8k16, f16 x f16 -> fp32).
__device__ inline void wgmma_m64n8k16_f16(float (&d)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3,
                                          uint64_t desc_b, bool accumulate) {
#if defined(M2CPP_DEVICE_WGMMA)
  asm volatile(
      "{\n"
      ".reg .pred p;\n"
      "setp.ne.b32 p, %9, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16 {%0, %1, %2, %3}, {%4, %5, %6, %7}, %8, p, 1, 1, 0;\n"
      "}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "l"(desc_b), "r"(static_cast<int>(accumulate)));
#else
  __trap();  // never launched: the host checks CudaFeatures::wgmma
#endif
}

}  // namespace m2::cuda
