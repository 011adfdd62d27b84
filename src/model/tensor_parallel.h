// A tensor- (or expert-) parallel group of ranks in one process, the ranks
// threads: each has its own backend, its weight shard (model/weight_shard.h),
// its MiniMaxM2 over them (the one forward pass, calling its communicator
// where the shards meet) and its KV cache of its own kv heads. A step runs
// on every rank at once; the ranks meet in the communicator's collectives,
// so they step in lockstep. MiniMaxM2::tensor_parallel wraps a group in the
// interface the engine uses.
//
// Across nodes (model/node_group.h) each node's process holds a group of its
// own ranks (global ranks node_rank * local .. + local - 1), their
// collectives meeting the other nodes' through the node group; node 0 sends
// each of its calls (run_call) to the others, which run them in
// MiniMaxM2::follow_node_zero.
#pragma once

#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <thread>
#include <vector>

#include "model/backend.h"
#include "model/communicator.h"
#include "model/weight_shard.h"

namespace m2 {

class MiniMaxM2;
class NodeGroup;

class TensorParallelGroup {
 public:
  // Rank r's backend (CPU: a pool of its own; GPU, later: device r).
  using BackendFactory = std::function<Result<std::unique_ptr<Backend>>(int rank)>;
  // The group's communicators, communicator r for rank r, given every rank's
  // backend (a GPU group's peer-to-peer collectives: make_cuda_peer_communicators).
  using CommunicatorFactory =
      std::function<Result<std::vector<std::unique_ptr<Communicator>>>(std::span<Backend* const> ranks)>;

  // Shards `full` (which must outlive the group), prepares each shard on its
  // rank's backend and starts the ranks' threads. Without `make_comms` the
  // ranks meet in the in-process communicator (a device rank's buffers
  // staged through the host: stage_through_host). With `nodes` the group is
  // this node's share of parallel.tensor_parallel_size ranks (nnodes divides
  // it), meeting the others in make_node_communicators (make_comms unused).
  static Result<std::unique_ptr<TensorParallelGroup>> create(const ModelWeights& full, const ParallelConfig& parallel,
                                                             const BackendFactory& make_backend,
                                                             const CommunicatorFactory& make_comms = {},
                                                             std::shared_ptr<NodeGroup> nodes = nullptr);
  ~TensorParallelGroup();

  // This process's ranks (local rank r is global rank first_rank() + r).
  int size() const { return static_cast<int>(ranks_.size()); }
  int first_rank() const { return first_rank_; }
  int global_size() const { return parallel_.tensor_parallel_size; }
  // The node group (nullptr: one node).
  NodeGroup* nodes() const { return nodes_.get(); }
  const ParallelConfig& parallel() const { return parallel_; }
  MiniMaxM2& model(int rank) { return *ranks_[rank].model; }
  Backend& backend(int rank) { return *ranks_[rank].backend; }

  Communicator& comm(int rank) { return *ranks_[rank].comm; }

  // Runs fn(rank) on every rank's thread at once and returns when all are
  // done: OK, or the first failing rank's error. Every rank should make the
  // same collectives (arguments are checked alike on every rank first); one
  // that fails alone aborts the group's collectives, the others stop with
  // "rank r failed: ..." and the group is unusable afterwards (with host
  // communicators; GPU peer kernels stop after their 60 s timeout).
  Status run(const std::function<Status(int rank)>& fn);
  // run(fn) as node 0 of a node group: call() (its bytes: node_call.h) goes to
  // the other nodes first, their statuses are read after
  // (NodeGroup::end_call). One node: run(fn), call() not made.
  Status run_call(const std::function<std::vector<uint8_t>()>& call, const std::function<Status(int rank)>& fn);
  // Whether the last run's failure on this node was another node's or
  // rank's (its ranks were stopped), rather than its own.
  bool stopped_by_peer() const { return stopped_by_peer_; }

 private:
  struct Rank {
    std::unique_ptr<Backend> backend;
    std::unique_ptr<ModelWeights> weights;
    std::unique_ptr<Communicator> comm;
    std::unique_ptr<MiniMaxM2> model;
    std::thread thread;
    Status status;
    bool stopped_by_peer = false;  // status: a collective aborted by another rank's failure
  };
  TensorParallelGroup() = default;
  void worker(int rank);

  ParallelConfig parallel_;
  int first_rank_ = 0;
  std::shared_ptr<NodeGroup> nodes_;
  bool stopped_by_peer_ = false;
  std::vector<Rank> ranks_;
  std::mutex mu_;
  std::condition_variable cv_;
  const std::function<Status(int)>* job_ = nullptr;
  uint64_t generation_ = 0;  // bumped per job
  int pending_ = 0;          // ranks still in the current job
  bool stop_ = false;
};

}  // namespace m2
