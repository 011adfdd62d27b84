// The in-process Communicator: ranks are threads sharing the address space,
// so a collective is "post my buffer, wait for all, work on the others'
// buffers directly, wait for all". The all-reduce is a reduce-scatter and an
// all-gather in one pass: rank r sums chunk r of every rank's buffer (in rank
// order) and writes the sum into chunk r of every rank's buffer; the chunks
// are disjoint, so no two ranks touch the same floats between the barriers.
#include <algorithm>
#include <condition_variable>
#include <mutex>
#include <string>
#include <cstring>

#include "model/communicator.h"

namespace m2 {
namespace {

// A barrier that a failed rank can break (Communicator::abort): every rank
// waiting in it, and every later arrival, throws CollectiveAborted.
class BreakableBarrier {
 public:
  explicit BreakableBarrier(int n) : n_(n) {}
  void arrive_and_wait() {
    std::unique_lock<std::mutex> lock(mu_);
    if (!why_.empty()) throw CollectiveAborted(why_);
    const uint64_t phase = phase_;
    if (++arrived_ == n_) {
      arrived_ = 0, ++phase_;
      cv_.notify_all();
      return;
    }
    cv_.wait(lock, [&] { return phase_ != phase || !why_.empty(); });
    if (phase_ == phase) throw CollectiveAborted(why_);
  }
  void abort(std::string why) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (why_.empty()) why_ = std::move(why);
    }
    cv_.notify_all();
  }

 private:
  const int n_;
  std::mutex mu_;
  std::condition_variable cv_;
  int arrived_ = 0;
  uint64_t phase_ = 0;
  std::string why_;  // non-empty once aborted
};

struct Group {
  Group(int n, int first, int named) : size(n), first_rank(first), named_size(named), sync(n), posted(n, nullptr) {}
  int size;
  int first_rank, named_size;  // how abort names the ranks (a node's ranks of a larger group)
  BreakableBarrier sync;
  std::vector<void*> posted;  // each rank's buffer of the collective in progress
};

class LocalCommunicator final : public Communicator {
 public:
  LocalCommunicator(std::shared_ptr<Group> g, int rank) : g_(std::move(g)), rank_(rank) {}

  int rank() const override { return rank_; }
  int size() const override { return g_->size; }

  void all_reduce_sum(float* data, int64_t n) override {
    if (g_->size == 1) return;
    post(data);
    const int64_t chunk = (n + g_->size - 1) / g_->size;
    const int64_t begin = std::min(n, rank_ * chunk), end = std::min(n, begin + chunk);
    sum_.assign(static_cast<size_t>(end - begin), 0.0f);
    for (int r = 0; r < g_->size; ++r) {  // rank order: the same sum whoever forms it
      const float* src = static_cast<const float*>(g_->posted[r]) + begin;
      for (int64_t i = 0; i < end - begin; ++i) sum_[i] += src[i];
    }
    for (int r = 0; r < g_->size; ++r)
      std::copy(sum_.begin(), sum_.end(), static_cast<float*>(g_->posted[r]) + begin);
    g_->sync.arrive_and_wait();  // every chunk written before anyone reads its buffer
  }

  void all_gather(const float* in, int64_t n, float* out) override {
    post(const_cast<float*>(in));
    for (int r = 0; r < g_->size; ++r)
      std::memcpy(out + r * n, g_->posted[r], static_cast<size_t>(n) * sizeof(float));
    g_->sync.arrive_and_wait();  // nobody reuses `in` while another rank still reads it
  }

  void broadcast(void* data, size_t bytes, int root) override {
    post(data);
    if (rank_ != root) std::memcpy(data, g_->posted[root], bytes);
    g_->sync.arrive_and_wait();
  }

  void barrier() override { g_->sync.arrive_and_wait(); }
  void abort(const std::string& why) override {
    g_->sync.abort("tensor-parallel rank " + std::to_string(g_->first_rank + rank_) + " of " +
                   std::to_string(g_->named_size) + " failed: " + why);
  }

 private:
  // Publishes this rank's buffer and waits until every rank has published.
  void post(void* p) {
    g_->posted[rank_] = p;
    g_->sync.arrive_and_wait();
  }
  std::shared_ptr<Group> g_;
  int rank_;
  std::vector<float> sum_;  // this rank's chunk of an all-reduce
};

}  // namespace

std::vector<std::unique_ptr<Communicator>> make_local_communicators(int size, int first_rank, int named_size) {
  auto g = std::make_shared<Group>(size, first_rank, named_size > 0 ? named_size : size);
  std::vector<std::unique_ptr<Communicator>> out;
  for (int r = 0; r < size; ++r) out.push_back(std::make_unique<LocalCommunicator>(g, r));
  return out;
}

}  // namespace m2
