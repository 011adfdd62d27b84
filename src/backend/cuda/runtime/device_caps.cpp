// Which kernels a device may run (device_caps.h): its architecture probed
// once, the decisions a pure function of it (tested without a GPU).
#include "backend/cuda/runtime/device_caps.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <mutex>
#include <vector>

#include "backend/cuda/attention/flashinfer_prefill.h"
#include "backend/cuda/gemm/fp8_gemm.h"
#include "backend/cuda/runtime/device_kernels.h"
#include "backend/cuda/moe/moe_cutlass.h"
#include "util/log.h"

namespace m2::cuda {

CudaFeatures cuda_features(const CudaArch& arch) {
  CudaFeatures f;
  f.pdl = arch.code >= kHopperArch;
  f.gpu_sampling = arch.code >= kHopperArch;
  // The shared memory test matters on sm_89 (99 KiB a block): the tiles of
  // our FP8 kernels (130 and 161 KiB) do not fit there.
  const bool mma = arch.code >= kFp8MmaArch;
  f.fp8_gemm_own = mma && arch.max_smem_per_block >= fp8_gemm_smem_bytes();
  f.fp8_moe = mma && arch.max_smem_per_block >= moe_fp8_smem_bytes();
  f.fp8_gemm_cublaslt = arch.device >= kHopperArch && f.fp8_gemm_own;
  f.cutlass_moe = kCutlassMoeBuilt && arch.device == kHopperArch && arch.code >= kHopperArch && f.fp8_moe;
  f.wgmma = kWgmmaBuilt && arch.device == kHopperArch && arch.code >= kHopperArch;
  return f;
}

DeviceCaps device_caps(const CudaArch& arch, int num_sms) {
  DeviceCaps c;
  c.arch = arch;
  c.features = cuda_features(arch);
  c.num_sms = num_sms;
  c.flashinfer_prefill = flashinfer_prefill_built() && c.features.wgmma;
  return c;
}

DeviceCaps h200_caps() { return device_caps(CudaArch{kHopperArch, kHopperArch, 227 * 1024}, 132); }

Fp8GemmMode fp8_gemm_mode_for(Fp8GemmMode requested, const CudaFeatures& f) {
  if (requested == Fp8GemmMode::kOff || !f.fp8_gemm_own) return Fp8GemmMode::kOff;
  if (requested == Fp8GemmMode::kCublasLt && !f.fp8_gemm_cublaslt) return Fp8GemmMode::kOwn;
  return requested;
}

std::string describe_fallbacks(const CudaArch& arch, const CudaFeatures& f) {
  std::string off;
  auto add = [&](const std::string& what) { off += (off.empty() ? "" : "; ") + what; };
  if (!f.gpu_sampling) add("sampling on the host (GPU sampling needs sm_90 code: thread block clusters)");
  if (!f.fp8_gemm_own || !f.fp8_moe) {
    const char* what = !f.fp8_gemm_own && !f.fp8_moe ? "FP8 GEMMs and the MoE"
                       : !f.fp8_gemm_own              ? "dense FP8 GEMMs"
                                                      : "the MoE";
    add(fmt::format("{} with fp32 activations (the FP8 tensor-core kernels need sm_89 code and {} KiB (dense) / {} "
                    "KiB (MoE) of shared memory a block; this device has {} KiB)",
                    what, fp8_gemm_smem_bytes() / 1024, moe_fp8_smem_bytes() / 1024, arch.max_smem_per_block / 1024));
  }
  if (f.fp8_gemm_own && !f.fp8_gemm_cublaslt)
    add("dense FP8 GEMMs on our kernel (cuBLASLt's block-scaled FP8 needs an sm_90 device)");
  if (!f.pdl) add("no early kernel starts (programmatic dependent launch needs sm_90 code)");
  if (!f.wgmma) add("decode MoE on SIMT kernels (its wgmma down pass needs sm_90a code on an sm_90 device)");
  if (off.empty()) return off;
  return fmt::format("kernels built for sm_{} on an sm_{} device: {}", arch.code, arch.device, off);
}

Result<CudaArch> probe_cuda_arch(int device) {
  CudaArch a;
  int major = 0, minor = 0, smem = 0;
  if (cudaSetDevice(device) != cudaSuccess ||
      cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess ||
      cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device) != cudaSuccess ||
      cudaDeviceGetAttribute(&smem, cudaDevAttrMaxSharedMemoryPerBlockOptin, device) != cudaSuccess) {
    const cudaError_t e = cudaGetLastError();
    return errorf("CUDA device {}: {}", device, cudaGetErrorString(e));
  }
  a.device = major * 10 + minor;
  a.max_smem_per_block = static_cast<size_t>(smem);
  if (a.device < kMinArch)
    return errorf("CUDA device {} is sm_{}: m2cpp's kernels need compute capability 8.0 or newer (cp.async, bf16 "
                  "tensor cores)",
                  device, a.device);
  if (kernels_loadable(&a.code) != cudaSuccess) {
    cudaGetLastError();  // no kernel image: not a sticky error
    return errorf("CUDA device {} (sm_{}) cannot run this build's kernels: rebuild with "
                  "-DCMAKE_CUDA_ARCHITECTURES={}-real (a ;-separated list takes several)",
                  device, a.device, a.device == kHopperArch ? "90a" : std::to_string(a.device));
  }
  return a;
}

namespace {
// Per device: 0 not probed yet, 1 no, 2 yes.
std::array<std::atomic<int>, 64> pdl_known{};
}  // namespace

void allow_pdl(int device, bool allowed) {
  if (device >= 0 && device < static_cast<int>(pdl_known.size())) pdl_known[device].store(allowed ? 0 : 1);
}

bool current_device_has_pdl() {
  auto& known = pdl_known;
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess || device < 0 || device >= static_cast<int>(known.size())) return false;
  int v = known[device].load(std::memory_order_relaxed);
  if (v == 0) {
    const Result<CudaArch> arch = probe_cuda_arch(device);
    v = arch.ok() && cuda_features(arch.value()).pdl ? 2 : 1;
    known[device].store(v, std::memory_order_relaxed);
  }
  return v == 2;
}

cudaError_t grant_dynamic_smem(const void* kernel, size_t bytes) {
  struct Grant {
    const void* kernel;
    int device;
    size_t bytes;
  };
  static std::mutex mu;
  static std::vector<Grant> grants;  // a few dozen kernel instantiations per device
  int device = 0;
  if (cudaError_t e = cudaGetDevice(&device); e != cudaSuccess) return e;
  std::lock_guard<std::mutex> lock(mu);
  auto it = std::find_if(grants.begin(), grants.end(), [&](const Grant& g) { return g.kernel == kernel && g.device == device; });
  if (it != grants.end() && it->bytes >= bytes) return cudaSuccess;
  const cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes));
  if (e != cudaSuccess) {
    log_smem_refused(bytes);
    return e;
  }
  if (it != grants.end()) it->bytes = bytes;
  else grants.push_back({kernel, device, bytes});
  return cudaSuccess;
}

void log_smem_refused(size_t bytes) {
  int device = 0, major = 0, minor = 0, smem = 0;
  cudaGetDevice(&device);
  cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device);
  cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device);
  cudaDeviceGetAttribute(&smem, cudaDevAttrMaxSharedMemoryPerBlockOptin, device);
  log_error("a kernel needs {:.1f} KiB of shared memory a block; CUDA device {} (sm_{}{}) allows {:.1f} KiB",
            bytes / 1024.0, device, major, minor, smem / 1024.0);
}

}  // namespace m2::cuda
