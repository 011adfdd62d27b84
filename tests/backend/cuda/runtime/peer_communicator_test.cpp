// The peer-to-peer collectives (make_cuda_peer_communicators) against the
// in-process communicator, the oracle of every communicator: with 2, 4 and 8
// ranks, each a CudaBackend of device 0 (one GPU's backends behave as peers:
// the same kernels, flags and staging buffers as across NVLink), the
// all-reduce gives the oracle's bits on every rank (both sum in rank order)
// and the all-gather its exact copy, over sizes from 1 float to more than one
// launch holds, repeated so that both staging parities and every block's
// epoch are reused; and the same collectives recorded in a CUDA graph and
// replayed give the same bits replay after replay. The fused all-reduce +
// residual add + RMSNorm (CudaBackend::all_reduce_add_rms_norm) gives the
// bits of the all-reduce followed by add_rms_norm on the same GPU, and the
// CPU backend's figures.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <thread>

#include "../cuda_test_util.h"
#include "backend/cuda/runtime/peer_collectives.h"
#include "model/communicator.h"

namespace m2::test {
namespace {

// Every kernel loaded when CUDA starts, as m2cpp does under -tp (cli/main.cpp:
// a lazily loaded first launch can deadlock against peers' spinning
// collectives). At static initialisation, before any test's first CUDA call;
// for the whole binary.
const bool kEagerModuleLoading = [] { return setenv("CUDA_MODULE_LOADING", "EAGER", 0) == 0; }();

// Rank r's element i: values over seven decades with both signs, so that the
// order of the sum shows in its bits.
float value(int rank, int64_t i, int round) {
  uint32_t h = static_cast<uint32_t>(i) * 2654435761u ^ static_cast<uint32_t>(rank * 40503 + round * 977 + 1);
  h ^= h >> 15, h *= 2246822519u, h ^= h >> 13;
  const float unit = static_cast<float>(h & 0xffffff) / 16777216.0f - 0.5f;
  static constexpr float kScale[7] = {1e-3f, 1e-2f, 0.1f, 1.0f, 10.0f, 100.0f, 1000.0f};
  return unit * kScale[(i + rank) % 7];
}

std::vector<float> values(int rank, int64_t n, int round) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[i] = value(rank, i, round);
  return v;
}

// Runs fn(rank) on one thread per rank and waits for all.
void on_every_rank(int n, const std::function<void(int)>& fn) {
  std::vector<std::thread> t;
  for (int r = 0; r < n; ++r) t.emplace_back(fn, r);
  for (auto& x : t) x.join();
}

struct PeerGroupFixture {
  explicit PeerGroupFixture(int n) {
    for (int r = 0; r < n; ++r) {
      backends.push_back(make_cuda_backend(0, test_options()));
      EXPECT_TRUE(backends.back() != nullptr);
      raw.push_back(backends.back().get());
    }
    auto c = make_cuda_peer_communicators(raw);
    EXPECT_TRUE(c.ok()) << c.status().message();
    if (c.ok()) comms = std::move(*c);
  }
  cudaStream_t stream(int r) { return static_cast<cudaStream_t>(cuda_stream(*backends[r])); }
  std::vector<std::unique_ptr<Backend>> backends;
  std::vector<Backend*> raw;
  std::vector<std::unique_ptr<Communicator>> comms;
};

// The oracle: the in-process communicator over host copies, one thread per rank.
std::vector<std::vector<float>> oracle_all_reduce(int n, int64_t floats, int round) {
  auto local = make_local_communicators(n);
  std::vector<std::vector<float>> out(n);
  for (int r = 0; r < n; ++r) out[r] = values(r, floats, round);
  on_every_rank(n, [&](int r) { local[r]->all_reduce_sum(out[r].data(), floats); });
  return out;
}

class PeerCommunicator : public ::testing::TestWithParam<int> {
 protected:
  void SetUp() override {
    if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device";
  }
};

TEST_P(PeerCommunicator, AllReduceAndAllGatherGiveTheInProcessCommunicatorsBits) {
  const int n = GetParam();
  PeerGroupFixture g(n);
  ASSERT_EQ(static_cast<int>(g.comms.size()), n);
  // Decode's QK sums and hidden rows, a prefill chunk, one float past a
  // launch, then the small ones again (the blocks' epochs and parities reused).
  const std::vector<int64_t> sizes = {2, 3072, 1, 7 * 3072 + 5, cuda::kPeerLaunchFloats + 1000, 2, 3072, 6 * 1024};
  for (size_t round = 0; round < sizes.size(); ++round) {
    const int64_t m = sizes[round];
    const auto want = oracle_all_reduce(n, m, static_cast<int>(round));
    std::vector<std::vector<float>> got(n);
    on_every_rank(n, [&](int r) {
      float* d = nullptr;
      cudaSetDevice(0);
      ASSERT_EQ(cudaMalloc(&d, m * sizeof(float)), cudaSuccess);
      const auto mine = values(r, m, static_cast<int>(round));
      ASSERT_EQ(cudaMemcpyAsync(d, mine.data(), m * sizeof(float), cudaMemcpyHostToDevice, g.stream(r)), cudaSuccess);
      g.comms[r]->all_reduce_sum(d, m);
      got[r].resize(m);
      ASSERT_EQ(cudaMemcpyAsync(got[r].data(), d, m * sizeof(float), cudaMemcpyDeviceToHost, g.stream(r)), cudaSuccess);
      ASSERT_EQ(cudaStreamSynchronize(g.stream(r)), cudaSuccess);
      cudaFree(d);
    });
    for (int r = 0; r < n; ++r)
      ASSERT_EQ(std::memcmp(got[r].data(), want[0].data(), m * sizeof(float)), 0)
          << "all-reduce of " << m << " floats, rank " << r;
  }
  // All-gather: a vocabulary slice (200,064 / 2 floats) and an odd size.
  for (const int64_t m : {int64_t{100032}, int64_t{17}}) {
    std::vector<std::vector<float>> got(n);
    on_every_rank(n, [&](int r) {
      float *in = nullptr, *out = nullptr;
      cudaSetDevice(0);
      ASSERT_EQ(cudaMalloc(&in, m * sizeof(float)), cudaSuccess);
      ASSERT_EQ(cudaMalloc(&out, n * m * sizeof(float)), cudaSuccess);
      const auto mine = values(r, m, 99);
      ASSERT_EQ(cudaMemcpyAsync(in, mine.data(), m * sizeof(float), cudaMemcpyHostToDevice, g.stream(r)), cudaSuccess);
      g.comms[r]->all_gather(in, m, out);
      got[r].resize(n * m);
      ASSERT_EQ(cudaMemcpyAsync(got[r].data(), out, n * m * sizeof(float), cudaMemcpyDeviceToHost, g.stream(r)),
                cudaSuccess);
      ASSERT_EQ(cudaStreamSynchronize(g.stream(r)), cudaSuccess);
      cudaFree(in), cudaFree(out);
    });
    for (int r = 0; r < n; ++r)
      for (int s = 0; s < n; ++s) {
        const auto want = values(s, m, 99);
        ASSERT_EQ(std::memcmp(got[r].data() + s * m, want.data(), m * sizeof(float)), 0)
            << "all-gather of " << m << " floats: rank " << r << "'s copy of rank " << s << "'s part";
      }
  }
}

// Recorded once per rank (the stream captured, the kernel's epochs on the
// device), replayed three times between eager collectives: the same bits
// every time.
TEST_P(PeerCommunicator, ReplayedFromAGraphTheCollectiveKeepsItsBits) {
  const int n = GetParam();
  PeerGroupFixture g(n);
  ASSERT_EQ(static_cast<int>(g.comms.size()), n);
  const int64_t m = 2 * 3072;
  const auto want = oracle_all_reduce(n, m, 5);
  std::vector<int> mismatches(n, 0);
  on_every_rank(n, [&](int r) {
    cudaSetDevice(0);
    cudaStream_t s = g.stream(r);
    float *src = nullptr, *dst = nullptr;
    ASSERT_EQ(cudaMalloc(&src, m * sizeof(float)), cudaSuccess);
    ASSERT_EQ(cudaMalloc(&dst, m * sizeof(float)), cudaSuccess);
    const auto mine = values(r, m, 5);
    ASSERT_EQ(cudaMemcpyAsync(src, mine.data(), m * sizeof(float), cudaMemcpyHostToDevice, s), cudaSuccess);
    cudaGraph_t graph = nullptr;
    ASSERT_EQ(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal), cudaSuccess);
    cudaMemcpyAsync(dst, src, m * sizeof(float), cudaMemcpyDeviceToDevice, s);
    g.comms[r]->all_reduce_sum(dst, m);
    ASSERT_EQ(cudaStreamEndCapture(s, &graph), cudaSuccess);
    cudaGraphExec_t exec = nullptr;
    ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
    // Every rank's instantiation (which may synchronise the shared GPU)
    // before any replay spins for its peers.
    g.comms[r]->barrier();
    std::vector<float> got(m);
    for (int replay = 0; replay < 3; ++replay) {
      ASSERT_EQ(cudaGraphLaunch(exec, s), cudaSuccess);
      ASSERT_EQ(cudaMemcpyAsync(got.data(), dst, m * sizeof(float), cudaMemcpyDeviceToHost, s), cudaSuccess);
      ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
      if (std::memcmp(got.data(), want[0].data(), m * sizeof(float)) != 0) ++mismatches[r];
      // An eager collective between replays (its epoch advances too).
      cudaMemcpyAsync(dst, src, m * sizeof(float), cudaMemcpyDeviceToDevice, s);
      g.comms[r]->all_reduce_sum(dst, 3);
    }
    ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
    cudaGraphExecDestroy(exec), cudaGraphDestroy(graph);
    cudaFree(src), cudaFree(dst);
  });
  for (int r = 0; r < n; ++r) EXPECT_EQ(mismatches[r], 0) << "rank " << r;
}

// A decode step's rows and a few more, at the M2 width and a narrow one
// (BF16 norm weights, as in the checkpoint).
TEST_P(PeerCommunicator, FusedAllReduceAddRmsNormGivesTheUnfusedBits) {
  const int n = GetParam();
  PeerGroupFixture g(n);
  ASSERT_EQ(static_cast<int>(g.comms.size()), n);
  HostTensors h(21);
  auto cpu = make_cpu_backend();
  for (const int64_t H : {int64_t{3072}, int64_t{256}}) {
    auto wv = h.randn(H, 0.2f);
    for (float& v : wv) v += 1.0f;
    const TensorView norm = h.store(wv, DType::kBF16, Shape{H});
    for (const int64_t T : {int64_t{1}, int64_t{3}, int64_t{32}}) {
      const int64_t m = T * H;
      const int round = static_cast<int>(H + T);
      const auto x0 = h.randn(m, 2.0f);
      // The CPU: x + the in-process all-reduce, then its add_rms_norm.
      auto sum = oracle_all_reduce(n, m, round)[0];
      std::vector<float> cx = x0, cout(m);
      cpu->add_rms_norm(Act{cx.data(), T, H}, Act{sum.data(), T, H}, norm, 1e-6f, Act{cout.data(), T, H});
      std::vector<std::vector<float>> fx(n), fo(n), ux(n), uo(n);
      on_every_rank(n, [&](int r) {
        cudaSetDevice(0);
        Backend& b = *g.backends[r];
        ModelWeights w;
        w.final_norm = norm;
        ASSERT_TRUE(b.prepare_weights(w).ok());
        std::vector<std::shared_ptr<void>> keep;
        const auto y = values(r, m, round);
        Act x1 = upload_act(b, keep, x0, T), y1 = upload_act(b, keep, y, T), o1 = upload_act(b, keep, x0, T);
        Act x2 = upload_act(b, keep, x0, T), y2 = upload_act(b, keep, y, T), o2 = upload_act(b, keep, x0, T);
        b.all_reduce_add_rms_norm(*g.comms[r], x1, y1, w.final_norm, 1e-6f, o1);
        b.Backend::all_reduce_add_rms_norm(*g.comms[r], x2, y2, w.final_norm, 1e-6f, o2);  // (unfused)
        fx[r] = download_act(b, x1), fo[r] = download_act(b, o1), ux[r] = download_act(b, x2), uo[r] = download_act(b, o2);
      });
      for (int r = 0; r < n; ++r) {
        SCOPED_TRACE(testing::Message() << "rank " << r << " of " << n << ", T " << T << ", H " << H);
        EXPECT_EQ(fx[r], ux[r]) << "residual, fused vs unfused";
        EXPECT_EQ(std::memcmp(fo[r].data(), uo[r].data(), m * sizeof(float)), 0) << "norm, fused vs unfused";
        EXPECT_EQ(fx[r], cx) << "residual vs the CPU";
        EXPECT_LE(rel_error(fo[r], cout), 1e-6) << "norm vs the CPU";
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(OneGpu, PeerCommunicator, ::testing::Values(2, 4, 8));

TEST(PeerCommunicatorConfig, MoreRanksThanTheKernelsTakeAreRefused) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device";
  std::vector<std::unique_ptr<Backend>> b;
  std::vector<Backend*> raw;
  for (int r = 0; r < 9; ++r) b.push_back(make_cuda_backend(0, test_options())), raw.push_back(b.back().get());
  auto c = make_cuda_peer_communicators(raw);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("1 to 8 GPUs"), std::string::npos) << c.status().message();
}

}  // namespace
}  // namespace m2::test
