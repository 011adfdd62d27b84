// The request threads: what a request costs in CPU before it reaches the
// engine (parsing a body of up to --max-request-body-bytes, rendering the
// chat template, tokenizing) runs here, off the I/O threads, so that a few
// 30 MB prompts cannot stall /health or any other connection. A fixed
// number of threads takes tasks in arrival order from a queue of bounded
// length; a task that finds the queue full is refused (the caller answers
// 503), so memory held by waiting requests is bounded too.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace m2::server {

class WorkQueue {
 public:
  // `threads` >= 1; `capacity`: tasks that may wait (not counting running ones).
  WorkQueue(int threads, size_t capacity);
  ~WorkQueue();
  WorkQueue(const WorkQueue&) = delete;
  WorkQueue& operator=(const WorkQueue&) = delete;

  // Thread-safe. False (the task dropped) when `capacity` tasks wait or the
  // queue has stopped.
  bool try_submit(std::function<void()> task);
  // Tasks waiting now.
  size_t waiting() const;
  // Drops the waiting tasks and joins the threads (running tasks finish).
  void stop();

 private:
  void run();

  const size_t capacity_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> tasks_;
  bool stop_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace m2::server
