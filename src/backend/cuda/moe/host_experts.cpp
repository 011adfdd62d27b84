#include "backend/cuda/moe/host_experts.h"

#include <sys/mman.h>

#include <algorithm>
#include <chrono>
#include <thread>
#include <tuple>

#include "backend/cpu/cpu_backend.h"
#include "backend/cuda/runtime/check.h"
#include "model/expert_placement.h"
#include "util/log.h"

namespace m2::cuda {
namespace {

constexpr int kMaxTopK = 32;  // the CPU path's routing staging holds this many experts per row

void* pinned_alloc(size_t bytes, const char* what) {
  void* p = nullptr;
  // Mapped + portable: device-addressable (UVA), so kernels (the dummy
  // weights' generator) and copies reach it directly.
  const cudaError_t e = cudaHostAlloc(&p, std::max<size_t>(bytes, 1), cudaHostAllocMapped | cudaHostAllocPortable);
  if (e != cudaSuccess) {
    cudaGetLastError();
    log_error("{}: cudaHostAlloc of {:.2f} GiB of pinned host memory failed: {}", what, bytes / 1073741824.0,
              cudaGetErrorString(e));
    return nullptr;
  }
  return p;
}

// Transparent huge pages where the kernel gives them (2 MiB: the CPU's
// expert reads of ~100 GiB miss the TLB on every 4 KiB page otherwise, and
// pinning 2 MiB pages is faster), pinned and mapped for the device.
void* map_huge_pinned(size_t bytes) {
  // Kernels (the dummy weights' generator) and the copies address the pages
  // by their host address: only where the device may.
  int device = 0, same_address = 0;
  if (cudaGetDevice(&device) != cudaSuccess ||
      cudaDeviceGetAttribute(&same_address, cudaDevAttrCanUseHostPointerForRegisteredMem, device) != cudaSuccess ||
      !same_address)
    return nullptr;
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) return nullptr;
  madvise(p, bytes, MADV_HUGEPAGE);
  if (cudaHostRegister(p, bytes, cudaHostRegisterMapped | cudaHostRegisterPortable) != cudaSuccess) {
    cudaGetLastError();
    munmap(p, bytes);
    return nullptr;
  }
  return p;
}

Status cuda_status(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return Status();
  cudaGetLastError();
  return errorf("host experts: creating the {} failed: {}", what, cudaGetErrorString(e));
}

Linear host_linear(const uint8_t* base, int64_t scale_off, DType dtype, int64_t rows, int64_t cols) {
  Linear l;
  l.weight.dtype = dtype, l.weight.shape = Shape{rows, cols}, l.weight.data = base;
  if (dtype == DType::kF8E4M3) {
    l.scale_inv.dtype = DType::kF32;
    l.scale_inv.shape = Shape{(rows + kFp8Block - 1) / kFp8Block, (cols + kFp8Block - 1) / kFp8Block};
    l.scale_inv.data = base + scale_off;
    l.block_rows = l.block_cols = kFp8Block;
  }
  return l;
}

}  // namespace

HostExpertRuntime::HostExpertRuntime(int device, int max_cpu_rows, int threads)
    : device_(device),
      max_cpu_rows_(std::max(1, max_cpu_rows)),
      pool_(host_expert_threads(threads, static_cast<int>(std::thread::hardware_concurrency()))),
      cpu_(std::make_unique<cpu::CpuBackend>(pool_)) {}

HostExpertRuntime::~HostExpertRuntime() {
  cudaSetDevice(device_);
  if (copy_stream_) cudaStreamSynchronize(copy_stream_);
  for (int b = 0; b < 2; ++b) {
    if (device_stage_[b]) cudaFree(device_stage_[b]);
    if (ready_[b]) cudaEventDestroy(ready_[b]);
    if (free_[b]) cudaEventDestroy(free_[b]);
  }
  if (copy_stream_) cudaStreamDestroy(copy_stream_);
  for (void* p : pinned_) cudaFreeHost(p);
  for (auto [p, bytes] : registered_) cudaHostUnregister(p), munmap(p, bytes);
}

void* HostExpertRuntime::pinned_huge(size_t bytes, const char* what) {
  if (void* p = map_huge_pinned(bytes)) {
    registered_.push_back({p, bytes});
    return p;
  }
  void* p = pinned_alloc(bytes, what);  // (no mmap + cudaHostRegister here: cudaHostAlloc's pages)
  if (p) pinned_.push_back(p);
  return p;
}

Result<HostExperts*> HostExpertRuntime::allocate(int layer, const DeviceExperts& layout) {
  const int64_t bytes13 = layout.stride13 * layout.num_experts, bytes2 = layout.stride2 * layout.num_experts;
  const int64_t bytes = 2 * bytes13 + bytes2;
  if (layer_bytes_ != 0 && bytes != layer_bytes_)
    return errorf("layer {} experts: {} bytes, the other host layers' {}", layer, bytes, layer_bytes_);
  const std::string what = fmt::format("layer {} experts (host)", layer);
  auto* base = static_cast<uint8_t*>(pinned_huge(bytes, what.c_str()));
  if (!base) return errorf("{}: cannot pin {:.2f} GiB of host memory", what, bytes / 1073741824.0);
  host_bytes_ += bytes;
  HostExperts& h = layers_.emplace_back();
  h.layer = layer;
  if (layers_.size() > 1 && layers_[layers_.size() - 2].layer + 1 == layer) layers_[layers_.size() - 2].next = &h;
  h.pinned = layout;
  h.pinned.w1 = base, h.pinned.w3 = base + bytes13, h.pinned.w2 = base + 2 * bytes13;
  const int64_t I = layout.intermediate, H = layout.hidden;
  h.cpu_view.experts.resize(static_cast<size_t>(layout.num_experts));
  for (int64_t e = 0; e < layout.num_experts; ++e) {
    ExpertWeights& w = h.cpu_view.experts[e];
    w.w1 = host_linear(h.pinned.w1 + e * layout.stride13, layout.scale_off13, layout.dtype, I, H);
    w.w3 = host_linear(h.pinned.w3 + e * layout.stride13, layout.scale_off13, layout.dtype, I, H);
    w.w2 = host_linear(h.pinned.w2 + e * layout.stride2, layout.scale_off2, layout.dtype, H, I);
  }
  if (layer_bytes_ == 0) {  // the first host layer: the staging of both paths
    layer_bytes_ = bytes;
    staging_hidden_ = H, staging_top_k_ = kMaxTopK;
    const size_t act = static_cast<size_t>(max_cpu_rows_ * H) * sizeof(float);
    const size_t route = static_cast<size_t>(max_cpu_rows_ * kMaxTopK) * sizeof(float);
    x_host_ = static_cast<float*>(pinned_alloc(act, "host experts' input rows"));
    out_host_ = static_cast<float*>(pinned_alloc(act, "host experts' output rows"));
    ids_host_ = static_cast<int32_t*>(pinned_alloc(route, "host experts' routing"));
    weights_host_ = static_cast<float*>(pinned_alloc(route, "host experts' routing weights"));
    for (void* p : {static_cast<void*>(x_host_), static_cast<void*>(out_host_), static_cast<void*>(ids_host_),
                    static_cast<void*>(weights_host_)}) {
      if (!p) return errorf("pinning the host experts' staging ({} rows) failed", max_cpu_rows_);
      pinned_.push_back(p);
    }
    for (int b = 0; b < 2; ++b) {
      void* d = nullptr;
      if (cudaMalloc(&d, static_cast<size_t>(bytes)) != cudaSuccess) {
        cudaGetLastError();
        size_t free_b = 0, total_b = 0;
        cudaMemGetInfo(&free_b, &total_b);
        return errorf("the host experts' device staging buffer {} ({:.2f} GiB) does not fit: {:.2f} GiB free", b,
                      bytes / 1073741824.0, free_b / 1073741824.0);
      }
      device_stage_[b] = static_cast<uint8_t*>(d);
      staged_[b] = layout;
      staged_[b].w1 = device_stage_[b], staged_[b].w3 = device_stage_[b] + bytes13;
      staged_[b].w2 = device_stage_[b] + 2 * bytes13;
      M2_RETURN_IF_ERROR(cuda_status(cudaEventCreateWithFlags(&ready_[b], cudaEventDisableTiming), "staging event"));
      M2_RETURN_IF_ERROR(cuda_status(cudaEventCreateWithFlags(&free_[b], cudaEventDisableTiming), "staging event"));
    }
    M2_RETURN_IF_ERROR(cuda_status(cudaStreamCreateWithFlags(&copy_stream_, cudaStreamNonBlocking), "copy stream"));
  }
  return &h;
}

void CUDART_CB HostExpertRuntime::run_job(void* p) {
  const Job& j = *static_cast<const Job*>(p);
  HostExpertRuntime& rt = *j.self;
  const Act x{rt.x_host_, j.rows, j.hidden}, out{rt.out_host_, j.rows, j.hidden};
  Routing r;
  r.expert_ids = rt.ids_host_, r.weights = rt.weights_host_, r.tokens = j.rows, r.top_k = j.top_k;
  const auto t0 = std::chrono::steady_clock::now();
  rt.cpu_->moe(x, j.host->cpu_view, r, out);
  rt.cpu_ns_.fetch_add(std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0).count(),
                       std::memory_order_relaxed);
  rt.cpu_calls_.fetch_add(1, std::memory_order_relaxed);
}

void HostExpertRuntime::moe_on_cpu(const HostExperts& host, const Act& x, const Routing& routing, const Act& out,
                                   cudaStream_t stream) {
  const int64_t T = x.rows, H = x.cols;
  if (T > max_cpu_rows_ || H != staging_hidden_ || routing.top_k > staging_top_k_) {
    log_error("moe of layer {} on the CPU: {} rows x {} (top {}) exceed the staging ({} rows x {}, top {})",
              host.layer, T, H, routing.top_k, max_cpu_rows_, staging_hidden_, staging_top_k_);
    std::abort();
  }
  auto& job = jobs_[{&host, T, routing.top_k}];
  if (!job) job = std::make_unique<Job>(Job{this, &host, T, routing.top_k, H});
  const size_t act = static_cast<size_t>(T * H) * sizeof(float), route = static_cast<size_t>(T * routing.top_k) * 4;
  auto ok = [&](cudaError_t e, const char* what) {
    if (e != cudaSuccess) die(e, "moe (host experts)", fmt::format("layer {}: {}", host.layer, what), __FILE__, __LINE__);
  };
  ok(cudaMemcpyAsync(x_host_, x.data, act, cudaMemcpyDeviceToHost, stream), "rows to the host");
  ok(cudaMemcpyAsync(ids_host_, routing.expert_ids, route, cudaMemcpyDeviceToHost, stream), "expert ids to the host");
  ok(cudaMemcpyAsync(weights_host_, routing.weights, route, cudaMemcpyDeviceToHost, stream), "weights to the host");
  ok(cudaLaunchHostFunc(stream, run_job, job.get()), "the CPU's experts");
  ok(cudaMemcpyAsync(out.data, out_host_, act, cudaMemcpyHostToDevice, stream), "rows back to the GPU");
}

void HostExpertRuntime::issue_copy(const HostExperts& host) {
  const int b = host.layer % 2;
  if (staged_host_[b] == &host) return;
  auto ok = [&](cudaError_t e) {
    if (e != cudaSuccess) die(e, "moe (host experts)", fmt::format("staging layer {}", host.layer), __FILE__, __LINE__);
  };
  ok(cudaStreamWaitEvent(copy_stream_, free_[b], 0));  // its previous layer's kernels are done
  // The layer's three stacks are one allocation on both sides.
  ok(cudaMemcpyAsync(device_stage_[b], host.pinned.w1, static_cast<size_t>(layer_bytes_), cudaMemcpyHostToDevice,
                     copy_stream_));
  ok(cudaEventRecord(ready_[b], copy_stream_));
  staged_host_[b] = &host;
}

const DeviceExperts& HostExpertRuntime::staged(const HostExperts& host, cudaStream_t stream) {
  issue_copy(host);
  if (host.next) issue_copy(*host.next);  // (the other buffer: consecutive layers)
  const int b = host.layer % 2;
  const cudaError_t e = cudaStreamWaitEvent(stream, ready_[b], 0);
  if (e != cudaSuccess) die(e, "moe (host experts)", fmt::format("waiting for layer {}", host.layer), __FILE__, __LINE__);
  return staged_[b];
}

void HostExpertRuntime::released(const HostExperts& host, cudaStream_t stream) {
  const cudaError_t e = cudaEventRecord(free_[host.layer % 2], stream);
  if (e != cudaSuccess) die(e, "moe (host experts)", fmt::format("releasing layer {}", host.layer), __FILE__, __LINE__);
}

}  // namespace m2::cuda
