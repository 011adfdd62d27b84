// The one-shot peer-to-peer collectives of a tensor-parallel group whose
// ranks are GPUs of one process (runtime/peer_communicator.cpp): every rank
// copies its part into its own staging buffer, tells every peer through a
// flag in the peer's memory, waits for every peer's flag and then reads all
// ranks' buffers directly (NVLink/PCIe peer access, or the same device). One
// kernel per collective on the rank's stream: no host round trip, and
// recordable in a step graph (the epochs that pair the flags live on the
// device and advance with every replay).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "backend/cuda/runtime/device_types.h"

namespace m2::cuda {

inline constexpr int kPeerMaxRanks = 8;
// Blocks of one collective kernel; block b always stages into region b of
// its rank's buffer and pairs with block b of every peer, so a region is only
// ever rewritten by the block that reads the flags guarding it.
inline constexpr int kPeerMaxBlocks = 32;
inline constexpr int64_t kPeerRegionFloats = int64_t{1} << 17;  // one block's staging, per parity (512 KiB)
// The most floats one kernel takes (larger collectives are split into launches).
inline constexpr int64_t kPeerLaunchFloats = kPeerMaxBlocks * kPeerRegionFloats;
// A rank's staging buffer: two parities (consecutive collectives of a block
// alternate, so a peer one collective ahead never overwrites what is being read).
inline constexpr int64_t kPeerBufferFloats = 2 * kPeerLaunchFloats;
inline constexpr int kPeerFlagWords = kPeerMaxRanks * kPeerMaxBlocks;  // [writer rank][block]

// Every rank's memory as rank `rank` sees it (one process: device pointers,
// peers' through peer access).
struct PeerRanks {
  float* buffers[kPeerMaxRanks];   // rank s's staging, kPeerBufferFloats
  uint32_t* flags[kPeerMaxRanks];  // rank s's flags, kPeerFlagWords, written by the others
  uint32_t* epochs = nullptr;      // this rank's collectives so far, per block [kPeerMaxBlocks]
  int size = 0;
  int rank = 0;
};

// All-reduce sum (`gather` false): out[i] = Σ_s in_s[i] over i in [0, n),
// formed as 0 + in_0 + in_1 + ... in rank order on every rank (the in-process
// communicator's bits). All-gather (`gather` true): out[s * out_stride + i] =
// in_s[i]. n <= kPeerLaunchFloats; in may equal out for the all-reduce. A
// rank that waits over `timeout_s` for a peer stops the kernel (__trap: the
// process ends with CUDA's message, not a hang).
cudaError_t launch_peer_collective(const PeerRanks& ranks, const float* in, float* out, int64_t n, bool gather,
                                   int64_t out_stride, int timeout_s, cudaStream_t stream);

// The all-reduce of a partial sum fused with the residual add and RMSNorm
// that follow it (a layer's o_proj and MoE outputs): per row t < rows,
//   x[t] += (0 + y_0[t] + y_1[t] + ...)   (y_s: rank s's y, in rank order)
//   out[t] = x[t] / rms(x[t]) * w          (fp64 statistics, no FMA)
// the same bits as launch_peer_collective then launch_add_rms_norm; with
// out8.q also out's FP8 copy (n a multiple of 128). One block per row: rows
// <= kPeerMaxBlocks, n <= kPeerFusedMaxCols; y is only read.
inline constexpr int64_t kPeerFusedMaxCols = 4096;
cudaError_t launch_peer_add_rms_norm(const PeerRanks& ranks, float* x, const float* y, int64_t rows, int64_t n,
                                     const void* w, DType w_dtype, float eps, float* out, Fp8Out out8, int timeout_s,
                                     cudaStream_t stream);

}  // namespace m2::cuda
