// cuda_time_all_reduce (cuda_backend.h): the all-reduce of a group of CUDA
// ranks timed as a decode or prefill step would call it, for `m2cpp bench
// allreduce`. Each rank is a thread with its own backend (its stream) on its
// GPU; every rank times `iters` back-to-back all-reduces between CUDA events
// and the slowest rank's time per call is the figure. Peer collectives are
// also timed recorded in one graph (as a replayed decode step runs them: no
// launch cost on the host). The fused kinds time a layer's all-reduce + add +
// RMSNorm over rows of kCollectiveNormCols (a BF16 norm weight of ones).
#include <cuda_runtime.h>

#include <algorithm>
#include <thread>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/runtime/backend_impl.h"
#include "backend/cuda/runtime/check.h"
#include "model/weights.h"

namespace m2 {

Result<std::vector<CollectiveTiming>> cuda_time_all_reduce(std::span<const int> devices, CollectiveKind kind,
                                                           std::span<const int64_t> sizes, int iters) {
  const bool peer = kind != CollectiveKind::kStaged;
  const bool norm = kind == CollectiveKind::kPeerAddRmsNorm || kind == CollectiveKind::kPeerThenAddRmsNorm;
  const int64_t H = kCollectiveNormCols;
  if (norm)
    for (const int64_t bytes : sizes)
      if (bytes % (H * 4) != 0) return errorf("the fused all-reduce + RMSNorm times whole rows of {} floats", H);
  const int n = static_cast<int>(devices.size());
  std::vector<std::unique_ptr<Backend>> backends;
  std::vector<Backend*> raw;
  for (int r = 0; r < n; ++r) {
    backends.push_back(make_cuda_backend(devices[r]));
    if (!backends.back()) return errorf("rank {}: the CUDA backend could not start on GPU {}", r, devices[r]);
    raw.push_back(backends.back().get());
  }
  std::vector<std::unique_ptr<Communicator>> comms;
  if (peer) {
    M2_ASSIGN_OR_RETURN(comms, make_cuda_peer_communicators(raw));
  } else {
    comms = make_local_communicators(n);
    for (int r = 0; r < n; ++r) comms[r] = stage_through_host(std::move(comms[r]), *raw[r]);
  }
  const int64_t max_bytes = sizes.empty() ? 0 : *std::max_element(sizes.begin(), sizes.end());
  std::vector<CollectiveTiming> out;
  for (const int64_t bytes : sizes) out.push_back({bytes, 0, 0});
  // ms[r][i]: rank r's time per call at size i (eager, graph).
  std::vector<std::vector<double>> eager_ms(n, std::vector<double>(sizes.size())), graph_ms = eager_ms;
  auto rank_main = [&](int r) {
    auto& cb = static_cast<cuda::CudaBackend&>(*raw[r]);
    M2_CUDA_CHECK(cudaSetDevice(cb.device()), "select GPU {}", cb.device());
    cudaStream_t s = cb.stream();
    float* buf = nullptr;
    M2_CUDA_CHECK(cudaMalloc(&buf, static_cast<size_t>(max_bytes)), "allocate {} bytes", max_bytes);
    M2_CUDA_CHECK(cudaMemsetAsync(buf, 0, static_cast<size_t>(max_bytes), s), "zero");
    float *x = nullptr, *y = nullptr;  // the norm's residual and output
    std::vector<uint16_t> ones(static_cast<size_t>(H), 0x3f80);  // bf16 1.0
    ModelWeights w;
    w.final_norm = TensorView{DType::kBF16, Shape{H}, ones.data()};
    if (norm) {
      M2_CUDA_CHECK(cudaMalloc(&x, static_cast<size_t>(max_bytes)), "allocate {} bytes", max_bytes);
      M2_CUDA_CHECK(cudaMalloc(&y, static_cast<size_t>(max_bytes)), "allocate {} bytes", max_bytes);
      M2_CUDA_CHECK(cudaMemsetAsync(x, 0, static_cast<size_t>(max_bytes), s), "zero");
      const Status st = cb.prepare_weights(w);
      if (!st.ok()) cuda::die(cudaErrorInvalidValue, "prepare the norm weight", st.message(), __FILE__, __LINE__);
    }
    Communicator& c = *comms[r];
    // One call of the kind timed, on `floats` floats.
    auto call = [&](int64_t floats) {
      if (!norm) return c.all_reduce_sum(buf, floats);
      const Act ax{x, floats / H, H}, ab{buf, floats / H, H}, ay{y, floats / H, H};
      if (kind == CollectiveKind::kPeerAddRmsNorm) {
        cb.all_reduce_add_rms_norm(c, ax, ab, w.final_norm, 1e-6f, ay);
      } else {
        cb.Backend::all_reduce_add_rms_norm(c, ax, ab, w.final_norm, 1e-6f, ay);
      }
    };
    cudaEvent_t a, b;
    M2_CUDA_CHECK(cudaEventCreate(&a), "event");
    M2_CUDA_CHECK(cudaEventCreate(&b), "event");
    for (size_t i = 0; i < sizes.size(); ++i) {
      const int64_t floats = sizes[i] / static_cast<int64_t>(sizeof(float));
      for (int k = 0; k < 3; ++k) call(floats);
      M2_CUDA_CHECK(cudaStreamSynchronize(s), "warm-up");
      c.barrier();
      M2_CUDA_CHECK(cudaEventRecord(a, s), "event");
      for (int k = 0; k < iters; ++k) call(floats);
      M2_CUDA_CHECK(cudaEventRecord(b, s), "event");
      M2_CUDA_CHECK(cudaEventSynchronize(b), "time {} bytes", sizes[i]);
      float ms = 0;
      cudaEventElapsedTime(&ms, a, b);
      eager_ms[r][i] = ms / iters;
      if (!peer) continue;  // (co-located peers too: nothing allocates between the replays)
      cudaGraph_t g = nullptr;
      cudaGraphExec_t exec = nullptr;
      M2_CUDA_CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal), "capture");
      for (int k = 0; k < iters; ++k) call(floats);
      M2_CUDA_CHECK(cudaStreamEndCapture(s, &g), "capture");
      M2_CUDA_CHECK(cudaGraphInstantiate(&exec, g, 0), "instantiate");
      c.barrier();  // (co-located ranks: every rank's instantiation done before any replay spins)
      M2_CUDA_CHECK(cudaGraphLaunch(exec, s), "replay");  // (warm)
      M2_CUDA_CHECK(cudaStreamSynchronize(s), "replay");
      c.barrier();
      M2_CUDA_CHECK(cudaEventRecord(a, s), "event");
      M2_CUDA_CHECK(cudaGraphLaunch(exec, s), "replay");
      M2_CUDA_CHECK(cudaEventRecord(b, s), "event");
      M2_CUDA_CHECK(cudaEventSynchronize(b), "replay {} bytes", sizes[i]);
      cudaEventElapsedTime(&ms, a, b);
      graph_ms[r][i] = ms / iters;
      cudaGraphExecDestroy(exec), cudaGraphDestroy(g);
    }
    cudaEventDestroy(a), cudaEventDestroy(b);
    cudaFree(buf), cudaFree(x), cudaFree(y);
  };
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) threads.emplace_back(rank_main, r);
  for (auto& t : threads) t.join();
  for (size_t i = 0; i < sizes.size(); ++i)
    for (int r = 0; r < n; ++r) {
      out[i].eager_us = std::max(out[i].eager_us, eager_ms[r][i] * 1e3);
      out[i].graph_us = std::max(out[i].graph_us, graph_ms[r][i] * 1e3);
    }
  return out;
}

}  // namespace m2
