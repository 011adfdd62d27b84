// make_cuda_peer_communicators (cuda_backend.h): a tensor-parallel group's
// collectives as one-shot peer kernels (runtime/peer_collectives.h) queued on
// each rank's stream. The group owns every rank's staging buffer and flags;
// each rank's communicator sees them all (one process: plain device pointers,
// with peer access enabled between distinct GPUs).
#include <cuda_runtime.h>

#include <fmt/format.h>

#include <algorithm>
#include <barrier>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/runtime/backend_impl.h"
#include "backend/cuda/runtime/check.h"
#include "backend/cuda/runtime/peer_collectives.h"
#include "model/communicator.h"
#include "util/log.h"

namespace m2 {
namespace cuda {
namespace {

// A peer that has not reached a collective this long after us has failed
// (its thread returned an error, or its GPU hung): every waiting rank stops.
constexpr int kPeerTimeoutSeconds = 60;

// Ranks that share a GPU (tests, M2CPP_TP_DEVICES=0,0) need one more rule.
// A co-located peer's collective spinning for us holds SMs of our GPU: a
// cudaMalloc or cudaFree of ours (they synchronise the whole device) then
// never returns, and a kernel of ours that needs its blocks co-resident
// (persistent GEMMs) may never be scheduled; either way our launch, which it
// waits for, never comes (run 59 hung both ways). So on a shared GPU a rank
// launches a collective only once its own earlier work is done and every
// rank's host has reached the collective (`arrival`, a host barrier): the
// spinners then wait only for launches already made, behind nothing. Graphs
// stay off there (queued_on_stream false: a replay launches collectives with
// no host step to gate). Ranks on distinct GPUs need neither: a spinning
// collective occupies only its own GPU, behind its own stream's earlier work.
struct PeerGroup {
  std::vector<int> devices;
  std::vector<float*> buffers;
  std::vector<uint32_t*> flags, epochs;
  bool co_located = false;
  std::unique_ptr<std::barrier<>> arrival;
  ~PeerGroup() {
    for (size_t r = 0; r < devices.size(); ++r) {
      cudaSetDevice(devices[r]);
      cudaFree(buffers[r]);
      cudaFree(flags[r]);
      cudaFree(epochs[r]);
    }
    if (const cudaError_t e = cudaGetLastError(); e != cudaSuccess)  // (not left for the next launch to report)
      log_warn("peer collectives: an error freeing the staging buffers: {}", cudaGetErrorString(e));
  }
};

class PeerCommunicator final : public Communicator {
 public:
  PeerCommunicator(std::shared_ptr<PeerGroup> g, int rank, CudaBackend& backend, std::unique_ptr<Communicator> host)
      : g_(std::move(g)), rank_(rank), device_(backend.device()), stream_(backend.stream()), host_(std::move(host)) {
    ranks_.size = static_cast<int>(g_->devices.size());
    ranks_.rank = rank;
    for (int s = 0; s < ranks_.size; ++s) ranks_.buffers[s] = g_->buffers[s], ranks_.flags[s] = g_->flags[s];
    ranks_.epochs = g_->epochs[rank];
  }

  int rank() const override { return rank_; }
  int size() const override { return ranks_.size; }
  bool queued_on_stream() const override { return !g_->co_located; }
  // Before each launch (PeerGroup): on a shared GPU, every rank's earlier
  // work done and every rank's host here (outside a graph capture).
  void arrive() {
    if (!g_->co_located) return;
    cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
    M2_CUDA_CHECK(cudaStreamIsCapturing(stream_, &capture), "peer collective: query the stream of rank {}", rank_);
    if (capture == cudaStreamCaptureStatusNone)
      M2_CUDA_CHECK(cudaStreamSynchronize(stream_), "peer collective: rank {}'s work before it", rank_);
    g_->arrival->arrive_and_wait();
  }

  void all_reduce_sum(float* data, int64_t n) override {
    if (ranks_.size > 1) collective(data, data, n, false);
  }
  void all_gather(const float* in, int64_t n, float* out) override { collective(in, out, n, true); }

  const PeerRanks& ranks() const { return ranks_; }
  int device() const { return device_; }

  // (Not on the step's path: staged through the host.)
  void broadcast(void* data, size_t bytes, int root) override { host_->broadcast(data, bytes, root); }
  void barrier() override { host_->barrier(); }
  void abort(const std::string& why) override {
    host_->abort(why);
    if (g_->co_located) g_->arrival->arrive_and_drop();  // (the arrivals: the others are not left waiting for us)
  }

 private:
  // n floats in launches of at most kPeerLaunchFloats (an all-gather's
  // output rows keep their stride n).
  void collective(const float* in, float* out, int64_t n, bool gather) {
    const char* what = gather ? "all-gather" : "all-reduce";
    M2_CUDA_CHECK(cudaSetDevice(device_), "peer {} on GPU {}", what, device_);
    for (int64_t c = 0; c < n; c += kPeerLaunchFloats) {
      arrive();
      M2_CUDA_CHECK(launch_peer_collective(ranks_, in + c, out + c, std::min(kPeerLaunchFloats, n - c), gather,
                                           gather ? n : 0, kPeerTimeoutSeconds, stream_),
                    "peer {} of {} floats (rank {} of {})", what, n, rank_, ranks_.size);
    }
  }

  std::shared_ptr<PeerGroup> g_;
  int rank_, device_;
  cudaStream_t stream_;
  PeerRanks ranks_;
  std::unique_ptr<Communicator> host_;
};

Status enable_peer_access(int from, int to) {
  int ok = 0;
  M2_CUDA_CHECK(cudaDeviceCanAccessPeer(&ok, from, to), "ask whether GPU {} reaches GPU {}", from, to);
  if (!ok)
    return errorf("tensor parallelism: GPU {} cannot access GPU {}'s memory (no peer-to-peer path between them; "
                  "`nvidia-smi topo -m` shows the links)",
                  from, to);
  M2_CUDA_CHECK(cudaSetDevice(from), "select GPU {}", from);
  const cudaError_t e = cudaDeviceEnablePeerAccess(to, 0);
  if (e == cudaErrorPeerAccessAlreadyEnabled) {
    cudaGetLastError();  // (clears it)
  } else if (e != cudaSuccess) {
    return errorf("tensor parallelism: enabling GPU {}'s access to GPU {}: {}", from, to, cudaGetErrorString(e));
  }
  return Status();
}

}  // namespace

ActCopy CudaBackend::all_reduce_add_rms_norm(Communicator& comm, Act x, Act y, const Weight& weight, float eps,
                                             Act out) {
  auto* peer = dynamic_cast<PeerCommunicator*>(&comm);
  if (!peer || peer->device() != device_ || peer->size() == 1 || x.rows > kPeerMaxBlocks ||
      x.cols > kPeerFusedMaxCols)
    return Backend::all_reduce_add_rms_norm(comm, x, y, weight, eps, out);
  bind_device();
  auto timer = timed([&] { return fmt::format("all_reduce_add_rms_norm T={}", x.rows); });
  auto context = [&] {
    return fmt::format("peer all-reduce + add_rms_norm of [{}, {}] (rank {} of {}) by {} {}", x.rows, x.cols,
                       peer->rank(), peer->size(), dtype_name(weight.dtype), weight.shape.str());
  };
  if (x.rows != y.rows || x.cols != y.cols || out.data == x.data)
    die(cudaErrorInvalidValue, "all_reduce_add_rms_norm", context(), __FILE__, __LINE__);
  ActCopy copy;
  const Fp8Out out8 = fp8_copy_for(out, &copy);
  peer->arrive();
  check(launch_peer_add_rms_norm(peer->ranks(), x.data, y.data, x.rows, x.cols,
                                 device_view(weight, "all_reduce_add_rms_norm"), weight.dtype, eps, out.data, out8,
                                 kPeerTimeoutSeconds, stream_),
        "all_reduce_add_rms_norm", context);
  return copy;
}

}  // namespace cuda

Result<std::vector<std::unique_ptr<Communicator>>> make_cuda_peer_communicators(std::span<Backend* const> ranks) {
  using namespace cuda;
  const int n = static_cast<int>(ranks.size());
  if (n < 1 || n > kPeerMaxRanks)
    return errorf("--tensor-parallel-size {}: the peer-to-peer collectives take 1 to {} GPUs of one process", n,
                  kPeerMaxRanks);
  std::vector<CudaBackend*> backends;
  for (Backend* b : ranks) {
    auto* c = dynamic_cast<CudaBackend*>(b);
    if (!c) return errorf("peer-to-peer collectives need a CUDA backend on every rank, not {}", b->name());
    backends.push_back(c);
  }
  auto g = std::make_shared<PeerGroup>();
  for (int r = 0; r < n; ++r)
    for (int s = 0; s < n; ++s)
      if (backends[r]->device() != backends[s]->device())
        M2_RETURN_IF_ERROR(enable_peer_access(backends[r]->device(), backends[s]->device()));
  for (int r = 0; r < n; ++r) {
    const int dev = backends[r]->device();
    M2_CUDA_CHECK(cudaSetDevice(dev), "select GPU {}", dev);
    float* buf = nullptr;
    uint32_t *flags = nullptr, *epochs = nullptr;
    const size_t buf_bytes = kPeerBufferFloats * sizeof(float);
    if (cudaMalloc(&buf, buf_bytes) != cudaSuccess || cudaMalloc(&flags, kPeerFlagWords * sizeof(uint32_t)) != cudaSuccess ||
        cudaMalloc(&epochs, kPeerMaxBlocks * sizeof(uint32_t)) != cudaSuccess) {
      cudaGetLastError();
      cudaFree(buf), cudaFree(flags), cudaFree(epochs);
      return errorf("tensor parallelism: the {} MiB staging buffer of rank {}'s collectives does not fit on GPU {}",
                    buf_bytes >> 20, r, dev);
    }
    g->devices.push_back(dev), g->buffers.push_back(buf), g->flags.push_back(flags), g->epochs.push_back(epochs);
    M2_CUDA_CHECK(cudaMemset(flags, 0, kPeerFlagWords * sizeof(uint32_t)), "zero rank {}'s flags", r);
    M2_CUDA_CHECK(cudaMemset(epochs, 0, kPeerMaxBlocks * sizeof(uint32_t)), "zero rank {}'s epochs", r);
    M2_CUDA_CHECK(cudaDeviceSynchronize(), "prepare rank {}'s collectives on GPU {}", r, dev);
  }
  for (int r = 0; r < n; ++r)
    for (int s = r + 1; s < n; ++s) g->co_located |= g->devices[r] == g->devices[s];
  g->arrival = std::make_unique<std::barrier<>>(n);
  auto host = make_local_communicators(n);
  std::vector<std::unique_ptr<Communicator>> out;
  for (int r = 0; r < n; ++r)
    out.push_back(std::make_unique<PeerCommunicator>(g, r, *backends[r], stage_through_host(std::move(host[r]), *backends[r])));
  return out;
}

}  // namespace m2
