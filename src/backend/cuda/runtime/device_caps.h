// What this build's kernels may do on a given GPU. The kernels are built for
// every architecture in CMAKE_CUDA_ARCHITECTURES (default sm_90a only); the
// code built for an architecture without a feature has it compiled out by
// __CUDA_ARCH__ guards (griddepcontrol is a no-op, the FP8 mma.sync and
// cluster kernels trap), so the backend decides here, on the host, which
// kernels it may launch and falls back where one is out of reach:
//
//   feature                          needs                    fallback
//   early kernel starts (PDL)        sm_90 code               ordinary launches
//   GPU sampling (sampling.cu)       sm_90 code (clusters)    sampling on the host
//   FP8 tensor-core GEMM / MoE       sm_89 code (e4m3 mma)    fp32-activation SIMT
//     (own kernels)                  + their shared memory      kernels
//   cuBLASLt block-scaled FP8 GEMM   an sm_90 device          our kernel, else SIMT
//   CUTLASS grouped FP8 MoE GEMMs    a CUTLASS build (sm_90a  our FP8 MoE kernel
//     (moe_cutlass.cu)                 code), an sm_90 device
//   decode MoE down pass on wgmma    sm_90a code, an sm_90    the SIMT streaming
//     (moe_decode_wgmma.cu)            device                   kernel
//
// "sm_90 code" is the architecture the loaded kernels were compiled for, which
// is lower than the device's own when a newer GPU JIT-compiles a PTX entry
// (e.g. "80" in CMAKE_CUDA_ARCHITECTURES): such code has no sm_90 features.
// Everything else (GEMV, attention, routing, MoE decode, norms, KV stores)
// runs on sm_80 and newer.
#pragma once

#include <cstddef>
#include <string>

#include "backend/cuda/runtime/cuda_options.h"
#include "util/status.h"

namespace m2::cuda {

// Architectures as compute capability x 10 (89: sm_89). The device guards
// (common.cuh, fp8_mma.cuh, sampling.cu) use the same thresholds x 10.
constexpr int kMinArch = 80;      // cp.async, bf16 mma.sync, everything else
constexpr int kFp8MmaArch = 89;   // mma.sync with e4m3 operands
constexpr int kHopperArch = 90;   // griddepcontrol, clusters, cuBLASLt block scaling

struct CudaArch {
  int device = 0;  // the GPU's compute capability
  int code = 0;    // the architecture its loaded kernels were compiled for (<= device)
  size_t max_smem_per_block = 0;  // dynamic shared memory a block may opt in to
};

struct CudaFeatures {
  bool pdl = false;
  bool gpu_sampling = false;
  bool fp8_gemm_own = false;  // fp8_gemm.cu
  bool fp8_moe = false;       // moe_fp8.cu
  // cuBLASLt's block-scaled FP8 matmul (VEC128 x BLK128x128 scales, Hopper
  // only as of cuBLAS 12.9); our kernel serves the shapes it has no
  // algorithm for, so it is used only together with fp8_gemm_own.
  bool fp8_gemm_cublaslt = false;
  // The grouped MoE's GEMMs on CUTLASS (moe_cutlass.cu: sm_90a machine code,
  // which runs on sm_90 devices only); our FP8 MoE kernel is its fallback.
  bool cutlass_moe = false;
  // Our wgmma kernels (moe_decode_wgmma.cu: sm_90a machine code, sm_90
  // devices only); the decode MoE's down pass falls back to its SIMT
  // streaming kernel.
  bool wgmma = false;
};

// Whether this build compiled sm_90a code (90a in CMAKE_CUDA_ARCHITECTURES),
// which the wgmma kernels need: plain sm_90 code has them compiled out.
#if defined(M2CPP_WITH_SM90A)
inline constexpr bool kWgmmaBuilt = true;
#else
inline constexpr bool kWgmmaBuilt = false;
#endif

CudaFeatures cuda_features(const CudaArch& arch);

// What the plans (*_plan.h) know of a device: its architecture, what this
// build may run on it, its SM count.
struct DeviceCaps {
  CudaArch arch;
  CudaFeatures features;
  int num_sms = 0;
  bool flashinfer_prefill = false;  // this build has FlashInfer's kernel and the device runs it (wgmma)
};
// The caps of `arch` with `num_sms` SMs, as this build sees them.
DeviceCaps device_caps(const CudaArch& arch, int num_sms);
// An H200 (sm_90, 132 SMs, 227 KiB of shared memory a block) with this
// build's kernels: what `m2cpp info --plan` shows on a machine without one.
DeviceCaps h200_caps();

// The FP8 GEMM mode a device with `f` runs when `requested` is asked for:
// cublaslt without cuBLASLt's block scaling becomes own, either without our
// kernel becomes off.
Fp8GemmMode fp8_gemm_mode_for(Fp8GemmMode requested, const CudaFeatures& f);

// One line naming what falls back on this device and why ("" if nothing).
std::string describe_fallbacks(const CudaArch& arch, const CudaFeatures& f);

// The architecture of `device` (made current), or why this build cannot run
// on it: compute capability below 8.0, or no kernel image for it.
Result<CudaArch> probe_cuda_arch(int device);

// Whether kernels launched now on the current device may start early (PDL):
// CudaFeatures::pdl of that device, probed once per device.
bool current_device_has_pdl();

}  // namespace m2::cuda
