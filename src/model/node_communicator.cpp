// The Communicator of one rank of a multi-node group (model/node_group.h):
// within the node the ranks meet in the in-process communicator; across
// nodes each node's first rank sends the node's buffers to node 0, which
// forms the result and sends it back, then the node's ranks share it.
//
// all_reduce_sum: the node's [local, n] buffers gathered, node 0 sums all
// [global, n] in global rank order starting from 0 (the in-process
// communicator's order: the same bits, tested), every rank gets the sum.
#include <cstring>

#include "model/node_group.h"

namespace m2 {
namespace {

enum Op : uint32_t { kAllReduce = 1, kAllGather, kBroadcast, kBarrier };

std::span<const uint8_t> bytes_of(const void* p, size_t n) { return {static_cast<const uint8_t*>(p), n}; }

class NodeCommunicator final : public Communicator {
 public:
  NodeCommunicator(std::shared_ptr<NodeGroup> nodes, std::unique_ptr<Communicator> local, int global_size)
      : nodes_(std::move(nodes)), local_(std::move(local)), size_(global_size) {}

  int rank() const override { return nodes_->node_rank() * local_->size() + local_->rank(); }
  int size() const override { return size_; }

  void all_reduce_sum(float* data, int64_t n) override {
    const int L = local_->size();
    gathered_.resize(static_cast<size_t>(L * n));
    local_->all_gather(data, n, gathered_.data());
    if (local_->rank() == 0) {
      const std::vector<uint8_t> sum =
          across({kAllReduce, 0, static_cast<uint64_t>(n) * sizeof(float)},
                 bytes_of(gathered_.data(), gathered_.size() * sizeof(float)), [&](auto per_node) {
                   std::vector<float> acc(static_cast<size_t>(n), 0.0f);
                   for (std::span<const uint8_t> node : per_node) {
                     const float* ranks = reinterpret_cast<const float*>(node.data());
                     for (int l = 0; l < L; ++l)  // global rank order: node by node, rank by rank
                       for (int64_t i = 0; i < n; ++i) acc[i] += ranks[l * n + i];
                   }
                   return to_bytes(acc.data(), acc.size() * sizeof(float));
                 });
      std::memcpy(data, sum.data(), sum.size());
    }
    local_->broadcast(data, static_cast<size_t>(n) * sizeof(float), 0);
  }

  void all_gather(const float* in, int64_t n, float* out) override {
    const int L = local_->size();
    gathered_.resize(static_cast<size_t>(L * n));
    local_->all_gather(in, n, gathered_.data());
    const size_t all = static_cast<size_t>(size_) * n * sizeof(float);
    if (local_->rank() == 0) {
      const std::vector<uint8_t> cat = across({kAllGather, 0, static_cast<uint64_t>(n) * sizeof(float)},
                                              bytes_of(gathered_.data(), gathered_.size() * sizeof(float)),
                                              [&](auto per_node) {
                                                std::vector<uint8_t> r;
                                                for (std::span<const uint8_t> node : per_node)
                                                  r.insert(r.end(), node.begin(), node.end());
                                                return r;
                                              });
      std::memcpy(out, cat.data(), std::min(all, cat.size()));
    }
    local_->broadcast(out, all, 0);
  }

  void broadcast(void* data, size_t bytes, int root) override {
    const int L = local_->size(), root_node = root / L;
    const bool mine = root_node == nodes_->node_rank();
    if (mine) local_->broadcast(data, bytes, root % L);
    if (local_->rank() == 0) {
      const std::vector<uint8_t> got =
          across({kBroadcast, root, bytes}, mine ? bytes_of(data, bytes) : std::span<const uint8_t>(),
                 [&](auto per_node) { return std::vector<uint8_t>(per_node[root_node].begin(), per_node[root_node].end()); });
      if (!mine) std::memcpy(data, got.data(), std::min(bytes, got.size()));
    }
    if (!mine) local_->broadcast(data, bytes, 0);
  }

  void barrier() override {
    local_->barrier();
    if (local_->rank() == 0) across({kBarrier, 0, 0}, {}, [](auto) { return std::vector<uint8_t>(); });
    local_->barrier();
  }

  void abort(const std::string& why) override { local_->abort(why); }

 private:
  static std::vector<uint8_t> to_bytes(const void* p, size_t n) {
    const uint8_t* b = static_cast<const uint8_t*>(p);
    return std::vector<uint8_t>(b, b + n);
  }
  // The node group's exchange; a failure stops this node's ranks (those
  // waiting for this one in the local communicator) and this rank.
  std::vector<uint8_t> across(const CollectiveHeader& h, std::span<const uint8_t> mine,
                              const NodeGroup::Combine& combine) {
    Result<std::vector<uint8_t>> r = nodes_->exchange(h, mine, combine);
    if (!r.ok()) {
      local_->abort(r.status().message());
      throw CollectiveAborted(r.status().message());
    }
    return std::move(*r);
  }

  std::shared_ptr<NodeGroup> nodes_;
  std::unique_ptr<Communicator> local_;
  int size_;
  std::vector<float> gathered_;  // the node's ranks' buffers [local, n]
};

}  // namespace

std::vector<std::unique_ptr<Communicator>> make_node_communicators(std::shared_ptr<NodeGroup> nodes, int global_size) {
  const int L = global_size / nodes->nnodes();
  std::vector<std::unique_ptr<Communicator>> out;
  for (auto& local : make_local_communicators(L, nodes->node_rank() * L, global_size))
    out.push_back(std::make_unique<NodeCommunicator>(nodes, std::move(local), global_size));
  return out;
}

}  // namespace m2
