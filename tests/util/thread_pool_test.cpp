#include "util/thread_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <vector>

namespace m2 {
namespace {

TEST(ThreadPool, EveryTaskRunsOnce) {
  ThreadPool pool(4);
  for (int round = 0; round < 200; ++round) {
    std::vector<std::atomic<int>> hits(257);
    pool.parallel_for(257, [&](int64_t t, int) { hits[t].fetch_add(1); });
    for (auto& h : hits) ASSERT_EQ(h.load(), 1);
  }
}

TEST(ThreadPool, RangesCoverAlignedAndDisjoint) {
  ThreadPool pool(3);
  std::vector<int> owner(1000, -1);
  pool.parallel_ranges(1000, 16, [&](int64_t b, int64_t e, int) {
    EXPECT_EQ(b % 16, 0);
    for (int64_t i = b; i < e; ++i) owner[i] = 1;
  });
  for (int v : owner) EXPECT_EQ(v, 1);
}

TEST(ThreadPool, NestedCallsRunInline) {
  ThreadPool pool(2);
  std::atomic<int> n{0};
  pool.parallel_for(4, [&](int64_t, int) { pool.parallel_for(3, [&](int64_t, int) { n++; }); });
  EXPECT_EQ(n.load(), 12);
}

}  // namespace
}  // namespace m2

namespace m2 {
namespace {

TEST(ThreadPool, ResizingTheGlobalPoolToItsSizeKeepsIt) {
  ThreadPool::set_global_threads(2);
  ThreadPool* before = &ThreadPool::global();
  ThreadPool::set_global_threads(2);  // e.g. --threads applied twice
  EXPECT_EQ(&ThreadPool::global(), before);
  ThreadPool::set_global_threads(0);
}

}  // namespace
}  // namespace m2
