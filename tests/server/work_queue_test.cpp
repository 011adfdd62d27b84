// The request threads' queue (server/work_queue.h): tasks run on its
// threads in order, a full queue refuses, stop() drops what waits.
#include "server/work_queue.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <thread>

namespace m2::server {
namespace {

TEST(WorkQueue, RunsTasksOffTheCallersThread) {
  WorkQueue q(2, 8);
  std::promise<std::thread::id> ran;
  ASSERT_TRUE(q.try_submit([&] { ran.set_value(std::this_thread::get_id()); }));
  EXPECT_NE(ran.get_future().get(), std::this_thread::get_id());
}

TEST(WorkQueue, AFullQueueRefusesAndStopDropsWhatWaits) {
  WorkQueue q(1, 2);
  std::promise<void> release;
  std::shared_future<void> gate = release.get_future().share();
  std::promise<void> started;
  std::atomic<int> ran{0};
  ASSERT_TRUE(q.try_submit([&, gate] {
    started.set_value();
    gate.wait();
    ++ran;
  }));
  started.get_future().wait();  // the one thread is busy
  EXPECT_TRUE(q.try_submit([&] { ++ran; }));
  EXPECT_TRUE(q.try_submit([&] { ++ran; }));
  EXPECT_FALSE(q.try_submit([&] { ++ran; }));  // two wait: the capacity
  EXPECT_EQ(q.waiting(), 2u);
  std::thread stopper([&] { q.stop(); });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  release.set_value();
  stopper.join();
  EXPECT_EQ(ran.load(), 1);  // the running task finished; the waiting ones were dropped
  EXPECT_FALSE(q.try_submit([&] { ++ran; }));
}

}  // namespace
}  // namespace m2::server
