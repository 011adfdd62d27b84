// A fixed pool of worker threads for data-parallel kernels. The calling
// thread takes part in every job, so a pool of N threads has N-1 workers.
// Workers spin briefly between jobs (a decode step issues thousands of small
// jobs; waking a sleeping thread costs ~10-50 us) and then sleep on a futex.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <thread>
#include <vector>

namespace m2 {

class ThreadPool {
 public:
  explicit ThreadPool(int n_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return n_threads_; }

  // Runs fn(task, thread) for every task in [0, n_tasks); tasks are handed out
  // dynamically. Returns when all are done. Called from inside a task, it runs
  // the tasks inline on the calling thread.
  void parallel_for(int64_t n_tasks, const std::function<void(int64_t task, int thread)>& fn);

  // Splits [0, n) into contiguous ranges (a few per thread, handed out
  // dynamically), aligned to `align` elements, and runs fn(begin, end,
  // thread) on each non-empty one.
  void parallel_ranges(int64_t n, int64_t align,
                       const std::function<void(int64_t begin, int64_t end, int thread)>& fn);

  // The process-wide pool used by the CPU backend (hardware threads unless
  // set_global_threads() was called first).
  static ThreadPool& global();
  // Resizes the global pool; a no-op at its current size. Call it before
  // anything holds global() (a backend keeps the reference).
  static void set_global_threads(int n_threads);

 private:
  void worker_main(int thread);
  void run_tasks(int thread);

  int n_threads_;
  std::vector<std::thread> workers_;
  const std::function<void(int64_t, int)>* fn_ = nullptr;
  int64_t n_tasks_ = 0;
  std::atomic<int64_t> next_task_{0};
  std::atomic<int> pending_workers_{0};
  std::atomic<uint32_t> generation_{0};
  std::atomic<bool> stop_{false};
};

}  // namespace m2
