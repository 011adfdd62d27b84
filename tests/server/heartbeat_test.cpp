// The heartbeat of quiet streams: each beat runs once per period on the
// heartbeat's thread until it returns false; destruction stops the thread.
#include "server/heartbeat.h"

#include <gtest/gtest.h>

#include <atomic>

namespace m2::server {
namespace {

TEST(Heartbeat, BeatsEachPeriodUntilTheBeatIsDone) {
  std::atomic<int> forever{0}, three{0};
  {
    Heartbeat h(std::chrono::milliseconds(10));
    h.add([&] { return ++forever, true; });
    h.add([&] { return ++three < 3; });
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    EXPECT_EQ(three.load(), 3) << "a beat that returned false runs no more";
    EXPECT_GE(forever.load(), 5);
    EXPECT_LE(forever.load(), 31);
  }
  const int after = forever.load();
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(forever.load(), after) << "nothing beats once the heartbeat is gone";
}

TEST(Heartbeat, NoThreadUntilTheFirstBeat) {
  Heartbeat h(std::chrono::seconds(100));  // destroyed at once: nothing to join, nothing waits 100 s
  EXPECT_EQ(h.period(), std::chrono::seconds(100));
}

}  // namespace
}  // namespace m2::server
