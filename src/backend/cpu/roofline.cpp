#include "backend/cpu/roofline.h"

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "backend/cpu/kernels.h"
#include "util/thread_pool.h"

namespace m2::cpu {

MemoryBandwidth measure_read_bandwidth(uint64_t buffer_bytes, int passes) {
  using clock = std::chrono::steady_clock;
  ThreadPool& pool = ThreadPool::global();
  const int64_t n = static_cast<int64_t>(buffer_bytes / sizeof(float));
  float* buf = static_cast<float*>(std::aligned_alloc(64, static_cast<size_t>(n) * sizeof(float)));
  // First touch from the threads that will read (NUMA placement), non-zero data.
  pool.parallel_ranges(n, 1 << 16, [&](int64_t b, int64_t e, int) {
    for (int64_t i = b; i < e; ++i) buf[i] = static_cast<float>(i & 7);
  });
  const Kernels& k = kernels();
  std::vector<float> sink(pool.size());
  double best = 0;
  for (int p = 0; p < passes; ++p) {
    const auto t0 = clock::now();
    pool.parallel_ranges(n, 1 << 16, [&](int64_t b, int64_t e, int t) { sink[t] += k.sum_f32(buf + b, e - b); });
    const double s = std::chrono::duration<double>(clock::now() - t0).count();
    best = std::max(best, static_cast<double>(buffer_bytes) / s);
  }
  volatile float keep = 0;
  for (float v : sink) keep = keep + v;
  std::free(buf);
  return {best, buffer_bytes, pool.size()};
}

double measure_fma_peak() {
  using clock = std::chrono::steady_clock;
  ThreadPool& pool = ThreadPool::global();
  const Kernels& k = kernels();
  const int64_t iters = 1 << 22;  // ~10-30 ms a thread
  std::vector<float> sink(pool.size());
  double best = 0;
  for (int p = 0; p < 5; ++p) {
    const auto t0 = clock::now();
    // One task a thread (handed out dynamically: a pass where one thread took
    // two is slower, and the best of five is kept).
    pool.parallel_for(pool.size(), [&](int64_t, int t) { sink[t] += k.fma_probe(iters); });
    const double s = std::chrono::duration<double>(clock::now() - t0).count();
    best = std::max(best, 2.0 * iters * kFmaChains * k.lanes * pool.size() / s);
  }
  volatile float keep = 0;
  for (float v : sink) keep = keep + v;
  return best;
}

double measure_matmul_flops() {
  using clock = std::chrono::steady_clock;
  ThreadPool& pool = ThreadPool::global();
  const int64_t T = 64, K = 1024, N = 1024;
  std::vector<float> x(T * K, 0.5f), w(N * K, 0.25f), y(T * N);
  WeightRef ref;
  ref.dtype = DType::kF32;
  ref.data = w.data();
  ref.ld = K;
  const Kernels& k = kernels();
  double best = 0;
  for (int p = 0; p < 5; ++p) {
    const auto t0 = clock::now();
    pool.parallel_ranges(N, 4, [&](int64_t b, int64_t e, int) { k.matmul(x.data(), T, K, K, ref, b, e, y.data(), N); });
    const double s = std::chrono::duration<double>(clock::now() - t0).count();
    best = std::max(best, 2.0 * T * K * N / s);
  }
  return best;
}

}  // namespace m2::cpu
