// Routed experts kept in host memory (issue 22: one GPU serves a model whose
// experts do not fit it). A host-resident layer's experts sit in pinned,
// device-addressable host memory in the device layout (DeviceExperts:
// stacked w1 | w3 | w2 with their fp32 128x128 scales), in their stored FP8.
// The MoE op of such a layer runs one of two ways, by the step's tokens:
//   - up to CudaOptions::cpu_moe_max_tokens (decode): the step's hidden rows
//     and routing go to pinned host buffers (a few KB), the CPU backend's
//     MoE computes them there on its own thread pool, inside a host function
//     queued on the stream (so graph replays include it), and the result
//     comes back; the GPU work before and after is queued without waiting;
//   - above it (prefill, large batches): the layer's experts are copied to
//     one of two device staging buffers over PCIe on a copy stream (the next
//     host layer's copy runs while this layer computes) and the GPU's MoE
//     kernels read them there.
// Owned by the CUDA backend; host code (no kernels).
#pragma once

#include <cuda_runtime.h>

#include <atomic>
#include <deque>
#include <map>
#include <memory>
#include <utility>
#include <vector>

#include "backend/cuda/runtime/device_types.h"
#include "model/backend.h"
#include "util/thread_pool.h"

namespace m2::cuda {

// One layer's experts in pinned host memory.
struct HostExperts {
  int layer = 0;
  const HostExperts* next = nullptr;  // the same model's next layer, when its experts are on the host too
  DeviceExperts pinned;   // the device layout, its pointers host addresses (UVA: kernels may write them)
  LayerWeights cpu_view;  // `experts` only: views into `pinned` for the CPU backend's moe
};

// MemAvailable of /proc/meminfo in bytes (0 if unreadable).
int64_t host_available_bytes();

class HostExpertRuntime {
 public:
  // `max_cpu_rows`: the largest step the CPU computes; `threads`: its pool.
  HostExpertRuntime(int device, int max_cpu_rows, int threads);
  ~HostExpertRuntime();
  HostExpertRuntime(const HostExpertRuntime&) = delete;
  HostExpertRuntime& operator=(const HostExpertRuntime&) = delete;

  // Pinned memory for layer `layer`'s experts laid out as `layout` (its
  // pointers ignored); two device staging buffers of that size on first use.
  // Layers are allocated in order; one allocated right after its predecessor
  // becomes that one's `next`.
  Result<HostExperts*> allocate(int layer, const DeviceExperts& layout);
  int max_cpu_rows() const { return max_cpu_rows_; }
  int threads() const { return pool_.size(); }
  // Time the CPU has spent computing experts so far (seconds), and its calls.
  double cpu_seconds() const { return cpu_ns_.load(std::memory_order_relaxed) * 1e-9; }
  int64_t cpu_calls() const { return cpu_calls_.load(std::memory_order_relaxed); }
  int64_t host_bytes() const { return host_bytes_; }

  // out [T, H] = the experts of `host` over x [T, H] and `routing` (device
  // memory), queued on `stream`. T <= max_cpu_rows: on the CPU.
  void moe_on_cpu(const HostExperts& host, const Act& x, const Routing& routing, const Act& out, cudaStream_t stream);
  // T > max_cpu_rows: the device copy of `host`'s experts, ready in `stream`
  // order (the copy of host.next, if any, is started too); call released()
  // after queueing the kernels that read it.
  const DeviceExperts& staged(const HostExperts& host, cudaStream_t stream);
  void released(const HostExperts& host, cudaStream_t stream);
  // The host copies were rewritten (a weight update): nothing staged is current.
  void invalidate_staging() { staged_host_[0] = staged_host_[1] = nullptr; }

 private:
  // What one host function call computes (a graph replays it: stable address).
  struct Job {
    HostExpertRuntime* self = nullptr;
    const HostExperts* host = nullptr;
    int64_t rows = 0;
    int top_k = 0;
    int64_t hidden = 0;
  };
  static void CUDART_CB run_job(void* job);
  void issue_copy(const HostExperts& host);

  int device_ = 0;
  int max_cpu_rows_ = 0;
  ThreadPool pool_;
  std::unique_ptr<Backend> cpu_;  // the CPU backend on pool_
  std::deque<HostExperts> layers_;
  // Pinned memory for a layer's experts: mmap'd huge pages registered with
  // CUDA (registered_), else cudaHostAlloc'd (pinned_, as the staging is).
  void* pinned_huge(size_t bytes, const char* what);
  std::vector<void*> pinned_;
  std::vector<std::pair<void*, size_t>> registered_;
  int64_t host_bytes_ = 0;
  // Pinned staging of the CPU path: x and out [max_cpu_rows, H], routing [max_cpu_rows, top_k].
  float* x_host_ = nullptr;
  float* out_host_ = nullptr;
  int32_t* ids_host_ = nullptr;
  float* weights_host_ = nullptr;
  int64_t staging_hidden_ = 0, staging_top_k_ = 0;
  std::map<std::tuple<const HostExperts*, int64_t, int>, std::unique_ptr<Job>> jobs_;
  // The GPU path's two staging buffers, their layer, and their events.
  int64_t layer_bytes_ = 0;
  uint8_t* device_stage_[2] = {nullptr, nullptr};
  DeviceExperts staged_[2];
  const HostExperts* staged_host_[2] = {nullptr, nullptr};
  cudaEvent_t ready_[2] = {nullptr, nullptr}, free_[2] = {nullptr, nullptr};
  cudaStream_t copy_stream_ = nullptr;
  std::atomic<int64_t> cpu_ns_{0}, cpu_calls_{0};
};

}  // namespace m2::cuda
