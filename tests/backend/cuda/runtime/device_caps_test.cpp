// Which kernels the backend may launch on which GPU (backend/cuda/runtime/device_caps.h):
// pure host decisions, so these run without a GPU. The code built for an
// architecture without a feature traps there; a wrong decision would launch it.
#include <gtest/gtest.h>

#include "backend/cuda/gemm/fp8_gemm.h"
#include "backend/cuda/runtime/device_caps.h"
#include "backend/cuda/moe/moe_cutlass.h"

namespace m2::test {
namespace {

using cuda::CudaArch;
using cuda::CudaFeatures;
using cuda::Fp8GemmMode;

constexpr size_t kKiB = 1024;
// Opt-in shared memory a block may have (CUDA C Programming Guide, compute
// capabilities table).
constexpr size_t kSmemSm80 = 163 * kKiB, kSmemSm89 = 99 * kKiB, kSmemSm90 = 227 * kKiB;

TEST(CudaDeviceCaps, HopperRunsEverything) {
  const CudaArch h200{90, 90, kSmemSm90};
  const CudaFeatures f = cuda::cuda_features(h200);
  EXPECT_TRUE(f.pdl && f.gpu_sampling && f.fp8_gemm_own && f.fp8_moe && f.fp8_gemm_cublaslt);
  EXPECT_EQ(f.cutlass_moe, cuda::kCutlassMoeBuilt);  // when the build has it
  EXPECT_EQ(f.wgmma, cuda::kWgmmaBuilt);
  for (Fp8GemmMode m : {Fp8GemmMode::kOwn, Fp8GemmMode::kCublasLt, Fp8GemmMode::kOff})
    EXPECT_EQ(cuda::fp8_gemm_mode_for(m, f), m);
  if (cuda::kWgmmaBuilt) {
    EXPECT_EQ(cuda::describe_fallbacks(h200, f), "");
  }
}

TEST(CudaDeviceCaps, AmpereRunsNoHopperOrFp8Kernels) {
  const CudaArch a100{80, 80, kSmemSm80};
  const CudaFeatures f = cuda::cuda_features(a100);
  EXPECT_FALSE(f.pdl || f.gpu_sampling || f.fp8_gemm_own || f.fp8_moe || f.fp8_gemm_cublaslt || f.cutlass_moe ||
               f.wgmma);
  for (Fp8GemmMode m : {Fp8GemmMode::kOwn, Fp8GemmMode::kCublasLt, Fp8GemmMode::kOff})
    EXPECT_EQ(cuda::fp8_gemm_mode_for(m, f), Fp8GemmMode::kOff);
  const std::string why = cuda::describe_fallbacks(a100, f);
  EXPECT_NE(why.find("sampling on the host"), std::string::npos) << why;
  EXPECT_NE(why.find("FP8 GEMMs and the MoE with fp32 activations"), std::string::npos) << why;
}

TEST(CudaDeviceCaps, AdaHasFp8MmaButTooLittleSharedMemoryForOurTiles) {
  const CudaArch l40s{89, 89, kSmemSm89};
  const CudaFeatures f = cuda::cuda_features(l40s);
  EXPECT_GT(cuda::fp8_gemm_smem_bytes(), kSmemSm89);
  EXPECT_GT(cuda::moe_fp8_smem_bytes(), kSmemSm89);
  EXPECT_FALSE(f.pdl || f.gpu_sampling || f.fp8_gemm_own || f.fp8_moe || f.fp8_gemm_cublaslt);
  EXPECT_EQ(cuda::fp8_gemm_mode_for(Fp8GemmMode::kCublasLt, f), Fp8GemmMode::kOff);
  // With the shared memory, sm_89 code runs our kernels but not cuBLASLt's
  // block scaling (an sm_90 device only).
  const CudaFeatures big = cuda::cuda_features(CudaArch{89, 89, kSmemSm90});
  EXPECT_TRUE(big.fp8_gemm_own && big.fp8_moe);
  EXPECT_FALSE(big.fp8_gemm_cublaslt || big.pdl || big.gpu_sampling);
  EXPECT_EQ(cuda::fp8_gemm_mode_for(Fp8GemmMode::kCublasLt, big), Fp8GemmMode::kOwn);
  EXPECT_EQ(cuda::fp8_gemm_mode_for(Fp8GemmMode::kOff, big), Fp8GemmMode::kOff);
}

TEST(CudaDeviceCaps, DecidesByTheCodeNotTheDevice) {
  // A Hopper GPU running the JIT-compiled PTX of an "80" entry: its code has
  // no griddepcontrol, clusters or FP8 mma.sync.
  const CudaFeatures ptx80 = cuda::cuda_features(CudaArch{90, 80, kSmemSm90});
  EXPECT_FALSE(ptx80.pdl || ptx80.gpu_sampling || ptx80.fp8_gemm_own || ptx80.fp8_moe);
  // cuBLASLt would run, but our kernel is its fallback for shapes it lacks.
  EXPECT_FALSE(ptx80.fp8_gemm_cublaslt);
  const CudaFeatures ptx89 = cuda::cuda_features(CudaArch{90, 89, kSmemSm90});
  EXPECT_TRUE(ptx89.fp8_gemm_own && ptx89.fp8_moe && ptx89.fp8_gemm_cublaslt);
  EXPECT_FALSE(ptx89.pdl || ptx89.gpu_sampling || ptx89.cutlass_moe || ptx89.wgmma);
}

TEST(CudaDeviceCaps, CutlassMoeAndWgmmaOnlyOnSm90Devices) {
  // Their sm_90a machine code runs on sm_90 only: not on a later GPU, even
  // one whose other kernels were built for it.
  for (const CudaArch& later : {CudaArch{100, 100, kSmemSm90}, CudaArch{100, 90, kSmemSm90}}) {
    EXPECT_FALSE(cuda::cuda_features(later).cutlass_moe);
    EXPECT_FALSE(cuda::cuda_features(later).wgmma);
    EXPECT_NE(cuda::describe_fallbacks(later, cuda::cuda_features(later)).find("decode MoE on SIMT kernels"),
              std::string::npos);
  }
  EXPECT_EQ(cuda::cuda_features(CudaArch{90, 90, kSmemSm90}).cutlass_moe, cuda::kCutlassMoeBuilt);
  EXPECT_EQ(cuda::cuda_features(CudaArch{90, 90, kSmemSm90}).wgmma, cuda::kWgmmaBuilt);
}

}  // namespace
}  // namespace m2::test
