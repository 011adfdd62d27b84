// What the loaded kernels can run on the current device (elementwise.cu, device_caps.cpp).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "backend/cuda/runtime/device_types.h"

namespace m2::cuda {

// cudaSuccess if this build has kernels for the current device; *arch: the
// architecture they were compiled for (__CUDA_ARCH__ / 10), below the
// device's own when it JIT-compiles a PTX entry of an older one.
// (elementwise.cu)
cudaError_t kernels_loadable(int* arch);

// ---- device_caps.cpp ----------------------------------------------------------
// Whether kernels launched now on the current device may start early
// (programmatic dependent launch): only sm_90 code has the griddepcontrol.wait
// that keeps such a kernel from reading what the one before has not written;
// and not after allow_pdl(device, false).
bool current_device_has_pdl();
// CudaOptions::pdl of the backend on `device` (a property of the device's
// launches: every backend on one device shares it; the last one set wins).
void allow_pdl(int device, bool allowed);
// Logs that a kernel asked the current device for `bytes` of shared memory a
// block and was refused, with the device's limit (99 KiB on sm_86/sm_89, 163
// on sm_80, 227 on sm_90): the failing op then stops naming itself.
void log_smem_refused(size_t bytes);
// Raises `kernel`'s dynamic shared memory limit on the current device to at
// least `bytes`, never lowering it: the limit is the function's, shared by
// every thread (every rank of a group on one GPU) that launches it, so a
// thread asking for less must not shrink what another was granted (a launch
// of the larger size would then fail "invalid argument"). Process-wide,
// under a lock: the slow path of allow_dynamic_smem.
cudaError_t grant_dynamic_smem(const void* kernel, size_t bytes);

}  // namespace m2::cuda
