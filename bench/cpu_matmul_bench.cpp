// CPU matmul kernels at M2 shapes, per dtype and token count, reporting the
// bytes of weights streamed per second (decode is bound by memory bandwidth)
// and FLOP/s. Compare with `m2cpp bench roofline` on the same machine.
// M2CPP_THREADS sets the thread count.
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <cstring>
#include <vector>

#include "backend/cpu/kernels.h"
#include "util/thread_pool.h"

namespace m2::cpu {
namespace {

struct Weights {
  std::vector<uint8_t> bytes;
  std::vector<float> scales;
  WeightRef ref;
  Weights(DType t, int64_t N, int64_t K) {
    bytes.assign(static_cast<size_t>(N * K) * dtype_size(t), 0x31);
    ref.dtype = t;
    ref.data = bytes.data();
    ref.ld = K;
    if (t == DType::kF8E4M3) {
      scales.assign(((N + 127) / 128) * ((K + 127) / 128), 0.01f);
      ref.scales = scales.data();
      ref.scale_ld = (K + 127) / 128;
    }
  }
};

void BM_Matmul(benchmark::State& state, DType t, int64_t N, int64_t K) {
  const int64_t T = state.range(0);
  Weights w(t, N, K);
  std::vector<float> x(T * K, 0.01f), y(T * N);
  ThreadPool& pool = ThreadPool::global();
  const Kernels& k = kernels();
  for (auto _ : state) {
    pool.parallel_ranges(N, 4, [&](int64_t b, int64_t e, int) { k.matmul(x.data(), T, K, K, w.ref, b, e, y.data(), N); });
    benchmark::DoNotOptimize(y.data());
  }
  state.counters["weight_GB/s"] = benchmark::Counter(static_cast<double>(w.bytes.size()) * state.iterations(),
                                                     benchmark::Counter::kIsRate, benchmark::Counter::kIs1000);
  state.counters["GFLOP/s"] = benchmark::Counter(2.0 * T * N * K * state.iterations() / 1e9, benchmark::Counter::kIsRate);
}

// lm_head (BF16, 200064 x 3072, 1.2 GB), q_proj (FP8 6144 x 3072), one expert's w1 (FP8 1536 x 3072).
BENCHMARK_CAPTURE(BM_Matmul, lm_head_bf16, DType::kBF16, 200064, 3072)->Arg(1)->Arg(4)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_CAPTURE(BM_Matmul, q_proj_fp8, DType::kF8E4M3, 6144, 3072)->Arg(1)->Arg(4)->Arg(64)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_CAPTURE(BM_Matmul, expert_w1_fp8, DType::kF8E4M3, 1536, 3072)->Arg(1)->Arg(16)->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK_CAPTURE(BM_Matmul, big_fp8, DType::kF8E4M3, 65536, 3072)->Arg(1)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace
}  // namespace m2::cpu

// M2CPP_THREADS=N: the pool's threads (default: the hardware's).
int main(int argc, char** argv) {
  if (const char* t = std::getenv("M2CPP_THREADS")) m2::ThreadPool::set_global_threads(std::atoi(t));
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
