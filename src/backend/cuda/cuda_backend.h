// The CUDA backend (Hopper first): every Backend op on one GPU, weights in
// their stored dtypes in device memory. Include-able without the CUDA
// headers; defined only in builds with M2CPP_WITH_CUDA.
#pragma once

#include <cstdint>
#include <memory>

#include <span>
#include <string>

#include "backend/cuda/runtime/cuda_options.h"
#include "backend/cuda/runtime/step_plan.h"
#include "model/backend.h"
#include "model/communicator.h"
#include "util/status.h"

namespace m2 {

// CUDA devices this process can use (0 without a driver or a device).
int cuda_device_count();

// The CUDA backend on `device` with `options` (logged at start); null (the
// reason logged) if it cannot start. Ops stop the process with the op, its
// shapes and CUDA's message if a CUDA call fails (runtime/check.h);
// prepare_weights returns errors.
std::unique_ptr<Backend> make_cuda_backend(int device, const cuda::CudaOptions& options = {});

// Every kernel each step of `steps` runs for `config` with `options`
// (`m2cpp info --plan`), and the scratch reserved for steps within `limits`:
// on CUDA device 0 when there is one, else on an H200 as this build would
// run it.
std::string cuda_describe_plans(const ModelConfig& config, std::span<const cuda::StepShape> steps,
                                const cuda::CudaOptions& options, const StepLimits& limits);

// The ceilings benchmarks are compared with, measured on `device` now (0 for
// one that could not be measured): device-to-device copy bandwidth counting
// bytes read plus bytes written, and cuBLASLt's dense GEMM rate.
struct CudaCeilings {
  double copy_bytes_per_s = 0;
  double bf16_flops = 0;
  double fp8_flops = 0;
};
// `gemm` false: the copy bandwidth only (a second, not ~10 s of GEMMs).
CudaCeilings cuda_measure_ceilings(int device, bool gemm = true);

// The communicators of a tensor-parallel group whose ranks are the CUDA
// backends `ranks` (one process; GPUs with peer access, or one GPU's several
// backends, which behave as peers): one-shot peer-to-peer collectives queued
// on each rank's stream (runtime/peer_collectives.h), so a step that calls
// them can be recorded as a graph. Sums in rank order: the in-process
// communicator's bits. An error names GPUs that cannot reach each other.
Result<std::vector<std::unique_ptr<Communicator>>> make_cuda_peer_communicators(std::span<Backend* const> ranks);

// The all-reduce of `devices.size()` ranks (rank r a CUDA backend on
// devices[r]; a device may repeat) timed at each of `sizes` bytes: the
// slowest rank's time per call over `iters` back-to-back calls, eagerly and
// (peer collectives only; 0 otherwise) replayed from one recorded graph.
enum class CollectiveKind {
  kPeer,                // make_cuda_peer_communicators' all-reduce
  kStaged,              // the in-process one staged through the host (stage_through_host)
  kPeerAddRmsNorm,      // all_reduce_add_rms_norm fused (rows of kCollectiveNormCols)
  kPeerThenAddRmsNorm,  // the peer all-reduce, then add_rms_norm (two kernels)
};
inline constexpr int64_t kCollectiveNormCols = 3072;  // M2's hidden size
struct CollectiveTiming {
  int64_t bytes = 0;
  double eager_us = 0;
  double graph_us = 0;
};
Result<std::vector<CollectiveTiming>> cuda_time_all_reduce(std::span<const int> devices, CollectiveKind kind,
                                                           std::span<const int64_t> sizes, int iters);

// The cudaStream_t every op of a CUDA backend is queued on (for timing with
// events and for graph capture).
void* cuda_stream(Backend& cuda_backend);

// How many FP8 products of a CUDA backend have so far read their input as
// its producer quantised it (an RMSNorm or the prefill attention writing the
// FP8 copy beside the fp32 output) instead of quantising it themselves; stays
// 0 with CudaOptions::fused_quant off. Tests check that the fused path is taken.
int64_t cuda_fp8_copies_used(Backend& cuda_backend);

// How many decode-step graphs a CUDA backend has recorded so far (tests:
// that start-up recording leaves none to record while serving).
int64_t cuda_graphs_recorded(Backend& cuda_backend);

// How many leading layers of the prepared model keep their experts in host
// memory (--n-cpu-moe), and the threads that compute them.
struct HostExpertInfo {
  int layers = 0;
  int threads = 0;
  int max_cpu_tokens = 0;
  double cpu_seconds = 0;  // spent computing experts on the CPU so far
  int64_t cpu_calls = 0;
};
HostExpertInfo cuda_host_experts(Backend& cuda_backend);

}  // namespace m2
