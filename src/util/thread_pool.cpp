#include "util/thread_pool.h"

#include <algorithm>
#include <memory>
#include <mutex>

#if defined(__x86_64__)
#include <immintrin.h>
#define M2_CPU_RELAX() _mm_pause()
#else
#define M2_CPU_RELAX() std::this_thread::yield()
#endif

namespace m2 {
namespace {
thread_local bool t_inside_job = false;
constexpr int kSpinIterations = 1 << 16;  // ~100 us of pause instructions

std::mutex g_global_mutex;
std::unique_ptr<ThreadPool> g_global;
int g_global_threads = 0;
}  // namespace

ThreadPool::ThreadPool(int n_threads) : n_threads_(std::max(1, n_threads)) {
  for (int t = 1; t < n_threads_; ++t) workers_.emplace_back([this, t] { worker_main(t); });
}

ThreadPool::~ThreadPool() {
  stop_.store(true);
  generation_.fetch_add(1, std::memory_order_release);
  generation_.notify_all();
  for (auto& w : workers_) w.join();
}

void ThreadPool::run_tasks(int thread) {
  t_inside_job = true;
  for (;;) {
    const int64_t task = next_task_.fetch_add(1, std::memory_order_relaxed);
    if (task >= n_tasks_) break;
    (*fn_)(task, thread);
  }
  t_inside_job = false;
}

void ThreadPool::worker_main(int thread) {
  uint32_t seen = 0;  // the generation at construction; a job may start before this thread runs
  for (;;) {
    uint32_t now = generation_.load(std::memory_order_acquire);
    for (int i = 0; now == seen && i < kSpinIterations; ++i) {
      M2_CPU_RELAX();
      now = generation_.load(std::memory_order_acquire);
    }
    while (now == seen) {
      generation_.wait(seen, std::memory_order_acquire);
      now = generation_.load(std::memory_order_acquire);
    }
    seen = now;
    if (stop_.load()) return;
    run_tasks(thread);
    pending_workers_.fetch_sub(1, std::memory_order_acq_rel);
  }
}

void ThreadPool::parallel_for(int64_t n_tasks, const std::function<void(int64_t, int)>& fn) {
  if (n_tasks <= 0) return;
  if (n_threads_ == 1 || n_tasks == 1 || t_inside_job) {
    for (int64_t t = 0; t < n_tasks; ++t) fn(t, 0);
    return;
  }
  fn_ = &fn;
  n_tasks_ = n_tasks;
  next_task_.store(0, std::memory_order_relaxed);
  pending_workers_.store(n_threads_ - 1, std::memory_order_relaxed);
  generation_.fetch_add(1, std::memory_order_release);
  generation_.notify_all();
  run_tasks(0);
  while (pending_workers_.load(std::memory_order_acquire) != 0) M2_CPU_RELAX();
  fn_ = nullptr;
}

void ThreadPool::parallel_ranges(int64_t n, int64_t align,
                                 const std::function<void(int64_t, int64_t, int)>& fn) {
  if (n <= 0) return;
  align = std::max<int64_t>(1, align);
  const int64_t units = (n + align - 1) / align;
  // A few parts per thread, claimed dynamically: when a thread is descheduled
  // (an oversubscribed machine) the others take over its share.
  const int64_t parts = std::min<int64_t>(n_threads_ == 1 ? 1 : 4ll * n_threads_, units);
  parallel_for(parts, [&](int64_t part, int thread) {
    const int64_t b = std::min(n, (units * part / parts) * align);
    const int64_t e = std::min(n, (units * (part + 1) / parts) * align);
    if (b < e) fn(b, e, thread);
  });
}

ThreadPool& ThreadPool::global() {
  std::lock_guard<std::mutex> lock(g_global_mutex);
  if (!g_global) {
    int n = g_global_threads > 0 ? g_global_threads : static_cast<int>(std::thread::hardware_concurrency());
    g_global = std::make_unique<ThreadPool>(n);
  }
  return *g_global;
}

void ThreadPool::set_global_threads(int n_threads) {
  std::lock_guard<std::mutex> lock(g_global_mutex);
  g_global_threads = n_threads;
  if (g_global && g_global->size() != std::max(1, n_threads)) g_global.reset();
}

}  // namespace m2
