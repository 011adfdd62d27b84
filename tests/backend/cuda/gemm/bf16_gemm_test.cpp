// The BF16 tensor-core path (backend/cuda/gemm/bf16_matmul.h): the hi + lo split
// of the fp32 activations and the two cuBLASLt GEMMs, against the CPU
// backend (fp32 activations), the SIMT kernel it replaces, and under graph
// capture. Shapes: N = 1000 (not a multiple of 128), K = 3072 / 2048, T of
// 17 (the first token count past the GEMV), 64 and 300.
//
// Bounds, with S = Σ_k |x_k w_k| per output (bf16_matmul.h derives (i)):
//   (i)   split: |x - hi - lo| <= 2^-17 |x|, so splitting moves an output by
//         at most 2^-17 S (hi·w and lo·w are exact in fp32);
//   (ii)  GPU accumulation: two fp32 sums of K exact products, plus the
//         beta = 1 add: at most (K + 1) u S, with u = 2^-23 to allow tensor
//         cores that truncate instead of rounding;
//   (iii) CPU accumulation: K · 2^-24 S (recursive fp32 summation).
//   |GPU - CPU| <= (2^-17 + (K + 1) 2^-23 + K 2^-24) S <= (2^-16 + 1.5 K 2^-23) S
//   per element. That worst case is loose (2^-17 + 1.5 K 2^-23 ~ 5.5e-4 at
//   K = 3072), so the typical error is also bounded: with random signs the
//   relative L2 error is the RMS of the per-element errors, <= 2^-17 ~ 7.6e-6
//   from the split plus ~sqrt(K) 2^-24 ~ 3e-6 of fp32 summation -> 2e-5 (the
//   fp32 matmul bound of tests/backend/ops_conformance_test.cpp). A path that dropped lo would be
//   off by the RMS of bf16 rounding, ~2^-9 / sqrt(3) ~ 1.1e-3.
// Exactness: integer activations |x| < 2^11 split exactly (hi keeps 8 bits,
// lo the rest) and with weights in {0, ±1} every partial sum is an integer
// below 2^24: results must equal the CPU's bit for bit, whatever the order.
#include <cuda_runtime.h>

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <optional>
#include <string>

#include "backend/cuda/gemm/bf16_matmul.h"
#include "backend/cuda/gemm/matmul.h"
#include "../cuda_test_util.h"

namespace m2::test {
namespace {

using cuda::Bf16Matmul;
using cuda::DeviceWeight;

constexpr double kRelL2Bound = 2e-5;
constexpr int64_t kN = 1000;
const std::vector<int64_t> kTokens = {17, 64, 300};

class Bf16Gemm : public CudaTest {
 protected:
  // A device copy of a BF16 linear (independent of the backend's uploads).
  DeviceWeight upload(const Linear& l) {
    const auto* w = static_cast<const uint16_t*>(l.weight.data);
    const int64_t N = l.out_features(), K = l.in_features();
    return DeviceWeight{reinterpret_cast<const uint8_t*>(gpu_array(std::vector<uint16_t>(w, w + N * K))), nullptr,
                        DType::kBF16, N, K, 0};
  }
  std::vector<float> cpu_matmul(std::vector<float> x, int64_t T, const Linear& w) {
    std::vector<float> y(T * w.out_features());
    cpu_->matmul(host_act(x, T), w, host_act(y, T));
    return y;
  }
  // Per output, (2^-16 + 1.5 K 2^-23) S: the bound above.
  static std::vector<double> bounds(const std::vector<float>& x, const Linear& l, int64_t T) {
    const int64_t N = l.out_features(), K = l.in_features();
    const auto* w = static_cast<const uint16_t*>(l.weight.data);
    const double factor = std::ldexp(1.0, -16) + 1.5 * K * std::ldexp(1.0, -23);
    std::vector<double> b(T * N);
    for (int64_t t = 0; t < T; ++t)
      for (int64_t n = 0; n < N; ++n) {
        double s = 0;
        for (int64_t k = 0; k < K; ++k) s += std::abs(double(x[t * K + k]) * bf16_to_f32(w[n * K + k]));
        b[t * N + n] = factor * s;
      }
    return b;
  }
  // Elements of got [T, N] further than `bound` from want; the first few are reported.
  static int over_bound(const std::vector<float>& got, const std::vector<float>& want,
                        const std::vector<double>& bound, int64_t N, const std::string& what) {
    int bad = 0;
    for (size_t i = 0; i < got.size(); ++i) {
      const double d = std::abs(double(got[i]) - want[i]);
      if (!(d <= bound[i]) && bad++ < 5)
        ADD_FAILURE() << what << ": row " << i / N << " col " << i % N << " expected " << want[i] << " got " << got[i]
                      << " (|diff| " << d << " > bound " << bound[i] << ")";
    }
    return bad;
  }
};

TEST_F(Bf16Gemm, SplitIsRoundToNearestAndWithinBound) {
  HostTensors h(31);
  const int64_t T = 17, K = 2048;
  std::vector<float> x(T * K);
  std::uniform_int_distribution<int> binade(-40, 40);
  for (float& v : x) v = std::ldexp(h.normal(), binade(h.rng()));  // wide dynamic range
  x[0] = 0.0f, x[1] = -0.0f, x[2] = INFINITY, x[3] = -INFINITY, x[4] = 1.0f + std::ldexp(1.0f, -8);  // a tie
  x[5] = 1.0f + std::ldexp(1.0f, -8) + std::ldexp(1.0f, -23);  // just above a tie
  uint16_t* hi = scratch<uint16_t>(T * K);
  uint16_t* lo = scratch<uint16_t>(T * K);
  ASSERT_EQ(cuda::launch_split_bf16(to_gpu(x, T).data, T, K, K, hi, lo, stream()), cudaSuccess);
  const auto got_hi = to_host(hi, T * K), got_lo = to_host(lo, T * K);
  int bad = 0;
  for (int64_t i = 0; i < T * K && bad < 5; ++i) {
    const uint16_t want_hi = f32_to_bf16(x[i]);
    const float hf = bf16_to_f32(want_hi);
    const uint16_t want_lo = std::isfinite(hf) ? f32_to_bf16(x[i] - hf) : 0;
    const double r = std::isfinite(hf) ? double(x[i]) - hf - bf16_to_f32(got_lo[i]) : 0.0;
    if (got_hi[i] != want_hi || got_lo[i] != want_lo || !(std::abs(r) <= std::ldexp(std::abs(double(x[i])), -17)))
      ADD_FAILURE() << "element " << i << " x " << x[i] << ": hi 0x" << std::hex << got_hi[i] << " (want 0x" << want_hi
                    << ") lo 0x" << got_lo[i] << " (want 0x" << want_lo << ")" << std::dec << ", residual " << r,
          ++bad;
  }
}

TEST_F(Bf16Gemm, ExactlyRepresentableInputsGiveExactResults) {
  HostTensors h(32);
  Bf16Matmul direct(true);
  for (int64_t K : {3072, 2048}) {
    std::vector<float> wv(kN * K);
    for (float& v : wv) v = static_cast<float>(static_cast<int>(h.rng()() % 3) - 1);
    ModelWeights w;
    w.lm_head.weight = h.store(wv, DType::kBF16, Shape{kN, K});
    const DeviceWeight d = upload(w.lm_head);
    prepare(w);
    for (int64_t T : kTokens) {
      const std::string what = fmt::format("[{}, {}] T {}", kN, K, T);
      std::vector<float> x(T * K);
      for (float& v : x) v = static_cast<float>(static_cast<int>(h.rng()() % 4095) - 2047);
      const auto want = cpu_matmul(x, T, w.lm_head);
      Act gx = to_gpu(x, T), gy = poisoned(T, kN), op = poisoned(T, kN);
      ASSERT_TRUE(direct.applies(gx.data, T, K, d, gy.data, kN)) << what;
      const cudaError_t e = direct.run(gx.data, T, K, d, gy.data, kN, stream());
      ASSERT_EQ(e, cudaSuccess) << what << ": " << cudaGetErrorString(e) << " (not supported: no cuBLASLt algorithm)";
      EXPECT_EQ(max_abs_diff(to_host(gy), want), 0.0) << "Bf16Matmul " << what;
      gpu_->matmul(gx, w.lm_head, op);  // the backend op (with the bf16_gemm variant as set)
      EXPECT_EQ(max_abs_diff(to_host(op), want), 0.0) << "matmul op " << what;
    }
  }
}

TEST_F(Bf16Gemm, RandomInputsMatchCpuWithinDerivedBound) {
  HostTensors h(33);
  Bf16Matmul direct(true);
  for (int64_t K : {3072, 2048}) {
    ModelWeights w;
    w.lm_head = h.linear(DType::kBF16, kN, K);
    const DeviceWeight d = upload(w.lm_head);
    prepare(w);
    for (int64_t T : kTokens) {
      const std::string what = fmt::format("[{}, {}] T {}", kN, K, T);
      auto x = h.randn(T * K, 3.0f);
      for (int64_t t = 0; t < T; ++t) x[t * K + (t * 37) % K] = 200.0f * (t % 2 ? 1 : -1);  // outliers
      const auto want = cpu_matmul(x, T, w.lm_head);
      const auto bound = bounds(x, w.lm_head, T);
      Act gx = to_gpu(x, T), tc = poisoned(T, kN), simt = poisoned(T, kN), op = poisoned(T, kN);
      const cudaError_t e = direct.run(gx.data, T, K, d, tc.data, kN, stream());
      ASSERT_EQ(e, cudaSuccess) << what << ": " << cudaGetErrorString(e);
      // The path it replaces: matmul.cu's SIMT kernel, fp32 activations.
      ASSERT_EQ(cuda::launch_matmul(cuda::MatmulKernel::kTiledSimt, gx.data, T, K, d, cuda::single_out(simt.data, kN, kN), num_sms(), stream()), cudaSuccess) << what;
      gpu_->matmul(gx, w.lm_head, op);
      const auto got_tc = to_host(tc), got_simt = to_host(simt), got_op = to_host(op);
      EXPECT_EQ(over_bound(got_tc, want, bound, kN, "tensor cores " + what), 0);
      EXPECT_EQ(over_bound(got_op, want, bound, kN, "matmul op " + what), 0);
      if (test_options().bf16_gemm) {  // the op takes this path: the same algorithm, the same bits
        EXPECT_EQ(max_abs_diff(got_op, got_tc), 0.0) << "matmul op vs Bf16Matmul " << what;
      }
      const double e_tc = rel_error(got_tc, want), e_simt = rel_error(got_simt, want);
      EXPECT_LE(e_tc, kRelL2Bound) << "tensor cores " << what;
      EXPECT_LE(rel_error(got_op, want), kRelL2Bound) << "matmul op " << what;
      EXPECT_LE(e_simt, kRelL2Bound) << "SIMT " << what;
      // Each GPU path is within the bound of the CPU, so within twice of each other.
      EXPECT_LE(rel_error(got_tc, got_simt), 2 * kRelL2Bound) << "tensor cores vs SIMT " << what;
      std::printf("  %s: rel L2 vs CPU: tensor cores %.2e, SIMT %.2e\n", what.c_str(), e_tc, e_simt);
    }
  }
}

// The bf16_gemm variant off: the backend keeps the SIMT kernel (fp32 activations),
// which agrees with the CPU and with the default backend's result.
TEST_F(Bf16Gemm, OffSwitchKeepsTheSimtKernel) {
  HostTensors h(34);
  const int64_t K = 3072, T = 64;
  const Linear l = h.linear(DType::kBF16, kN, K);
  std::unique_ptr<Backend> off;
  {
    off = make_cuda_backend(0, test_options("bf16_gemm=off"));
  }
  ASSERT_TRUE(off);
  ModelWeights w_on, w_off;
  w_on.lm_head = w_off.lm_head = l;
  prepare(w_on);
  ASSERT_TRUE(off->prepare_weights(w_off).ok());
  auto x = h.randn(T * K);
  const auto want = cpu_matmul(x, T, l);
  Act on_x = to_gpu(x, T), on_y = poisoned(T, kN);
  gpu_->matmul(on_x, w_on.lm_head, on_y);
  const auto got_on = to_host(on_y);
  // Buffers of the off backend, filled on its own stream.
  auto mem_x = off->allocate(x.size() * sizeof(float)), mem_y = off->allocate(T * kN * sizeof(float));
  off->copy_from_host(x.data(), mem_x.get(), x.size() * sizeof(float));
  off->matmul(Act{static_cast<float*>(mem_x.get()), T, K}, w_off.lm_head, Act{static_cast<float*>(mem_y.get()), T, kN});
  std::vector<float> got_off(T * kN);
  off->copy_to_host(mem_y.get(), got_off.data(), got_off.size() * sizeof(float));
  EXPECT_LE(rel_error(got_off, want), kRelL2Bound) << "bf16_gemm=off";
  EXPECT_LE(rel_error(got_on, want), kRelL2Bound) << "default";
  EXPECT_LE(rel_error(got_on, got_off), 2 * kRelL2Bound) << "default vs off";
  std::printf("  T %lld: rel L2 vs CPU: default %.2e, off %.2e\n", static_cast<long long>(T), rel_error(got_on, want),
              rel_error(got_off, want));
}

// A recorded call (split kernel + two cuBLASLt GEMMs) replays to the eager
// call's exact result: nothing is allocated or synchronised while recording
// (a synchronising call would end the capture with an error).
TEST_F(Bf16Gemm, RunsInsideAGraphCapture) {
  HostTensors h(35);
  const int64_t K = 2048, T = 64;
  ModelWeights w;
  w.lm_head = h.linear(DType::kBF16, kN, K);
  const DeviceWeight d = upload(w.lm_head);
  Bf16Matmul direct(true);
  const auto x = h.randn(T * K);
  Act gx = to_gpu(x, T), eager = poisoned(T, kN), replay = poisoned(T, kN);
  ASSERT_EQ(direct.run(gx.data, T, K, d, eager.data, kN, stream()), cudaSuccess);  // sizes scratch, makes the plan
  ASSERT_EQ(cudaStreamSynchronize(stream()), cudaSuccess);
  cudaGraph_t graph = nullptr;
  ASSERT_EQ(cudaStreamBeginCapture(stream(), cudaStreamCaptureModeGlobal), cudaSuccess);
  const cudaError_t e = direct.run(gx.data, T, K, d, replay.data, kN, stream());
  ASSERT_EQ(cudaStreamEndCapture(stream(), &graph), cudaSuccess);
  ASSERT_EQ(e, cudaSuccess);
  cudaGraphExec_t exec = nullptr;
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  const auto recorded = to_host(replay);
  EXPECT_TRUE(std::all_of(recorded.begin(), recorded.end(), [](float v) { return std::isnan(v); }))
      << "recording ran something";
  ASSERT_EQ(cudaGraphLaunch(exec, stream()), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(stream()), cudaSuccess);
  EXPECT_EQ(max_abs_diff(to_host(replay), to_host(eager)), 0.0) << "graph replay vs eager call";
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
}

}  // namespace
}  // namespace m2::test
