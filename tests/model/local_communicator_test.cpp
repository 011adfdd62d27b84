// The in-process communicator: every collective over threads as ranks,
// including sizes that do not divide the buffer and repeated use.
#include <gtest/gtest.h>

#include <thread>

#include "model/communicator.h"

namespace m2 {
namespace {

// Runs fn(rank, communicator) on one thread per rank.
template <typename Fn>
void on_ranks(int n, Fn fn) {
  auto comms = make_local_communicators(n);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) threads.emplace_back([&, r] { fn(r, *comms[r]); });
  for (auto& t : threads) t.join();
}

TEST(LocalCommunicator, AllReduceSumsInRankOrderAndGivesEveryRankTheSameBits) {
  for (int n : {1, 2, 3, 4, 8}) {
    for (int64_t len : {1, 5, 64, 1001}) {
      std::vector<std::vector<float>> data(n);
      on_ranks(n, [&](int r, Communicator& c) {
        EXPECT_EQ(c.rank(), r);
        EXPECT_EQ(c.size(), n);
        data[r].resize(len);
        for (int64_t i = 0; i < len; ++i) data[r][i] = 0.1f * static_cast<float>(r + 1) + 1e-3f * static_cast<float>(i);
        for (int rep = 0; rep < 3; ++rep) {  // reused: the second and third reduce the previous sums
          if (rep > 0) c.barrier();
          c.all_reduce_sum(data[r].data(), len);
        }
      });
      for (int64_t i = 0; i < len; ++i) {
        float want = 0;  // the sum of the first pass, in rank order, then twice more times n
        for (int r = 0; r < n; ++r) want += 0.1f * static_cast<float>(r + 1) + 1e-3f * static_cast<float>(i);
        for (int rep = 1; rep < 3; ++rep) {
          float s = 0;
          for (int r = 0; r < n; ++r) s += want;
          want = s;
        }
        for (int r = 0; r < n; ++r) ASSERT_EQ(data[r][i], want) << n << " ranks, length " << len << ", rank " << r;
      }
    }
  }
}

TEST(LocalCommunicator, AllGatherAndBroadcast) {
  const int n = 4;
  const int64_t len = 7;
  std::vector<std::vector<float>> gathered(n);
  std::vector<std::vector<int>> bcast(n);
  on_ranks(n, [&](int r, Communicator& c) {
    std::vector<float> mine(len);
    for (int64_t i = 0; i < len; ++i) mine[i] = static_cast<float>(100 * r + i);
    gathered[r].resize(n * len);
    c.all_gather(mine.data(), len, gathered[r].data());
    bcast[r] = {r, r, r};
    c.broadcast(bcast[r].data(), bcast[r].size() * sizeof(int), 2);
  });
  for (int r = 0; r < n; ++r) {
    for (int s = 0; s < n; ++s)
      for (int64_t i = 0; i < len; ++i) EXPECT_EQ(gathered[r][s * len + i], static_cast<float>(100 * s + i));
    EXPECT_EQ(bcast[r], (std::vector<int>{2, 2, 2}));
  }
}

}  // namespace
}  // namespace m2
