#include "model/tensor_parallel.h"

#include "model/minimax_m2.h"
#include "model/node_group.h"

namespace m2 {

Result<std::unique_ptr<TensorParallelGroup>> TensorParallelGroup::create(const ModelWeights& full,
                                                                         const ParallelConfig& parallel,
                                                                         const BackendFactory& make_backend,
                                                                         const CommunicatorFactory& make_comms,
                                                                         std::shared_ptr<NodeGroup> nodes) {
  M2_RETURN_IF_ERROR(check_parallel(full.config, parallel));
  const int nnodes = nodes ? nodes->nnodes() : 1;
  if (parallel.tensor_parallel_size % nnodes != 0)
    return errorf("--tensor-parallel-size {} over --nnodes {}: every node must hold as many ranks (a multiple of {})",
                  parallel.tensor_parallel_size, nnodes, nnodes);
  const int n = parallel.tensor_parallel_size / nnodes;  // this node's ranks
  std::unique_ptr<TensorParallelGroup> g(new TensorParallelGroup());
  g->parallel_ = parallel;
  g->first_rank_ = nodes ? nodes->node_rank() * n : 0;
  g->nodes_ = nodes;
  g->ranks_.resize(n);
  std::vector<Backend*> backends;
  for (int r = 0; r < n; ++r) {
    Rank& rank = g->ranks_[r];
    M2_ASSIGN_OR_RETURN(rank.backend, make_backend(r));
    if (!rank.backend->supports_tensor_parallel())
      return errorf("--tensor-parallel-size {}: the {} backend does not implement tensor parallelism yet", n,
                    rank.backend->name());
    backends.push_back(rank.backend.get());
  }
  std::vector<std::unique_ptr<Communicator>> comms;
  if (nodes) {
    comms = make_node_communicators(nodes, parallel.tensor_parallel_size);
  } else if (make_comms) {
    M2_ASSIGN_OR_RETURN(comms, make_comms(backends));
    if (static_cast<int>(comms.size()) != n) return errorf("tensor parallelism: {} communicators for {} ranks", comms.size(), n);
  } else {
    comms = make_local_communicators(n);
  }
  // The node and in-process communicators sum host buffers: a device rank's
  // go through the host (make_comms' are the backends' own).
  if (nodes || !make_comms)
    for (int r = 0; r < n; ++r)
      if (!backends[r]->activations_on_host()) comms[r] = stage_through_host(std::move(comms[r]), *backends[r]);
  for (int r = 0; r < n; ++r) {
    Rank& rank = g->ranks_[r];
    M2_ASSIGN_OR_RETURN(rank.weights, shard_weights(full, parallel, g->first_rank_ + r));
    M2_RETURN_IF_ERROR(rank.backend->prepare_weights(*rank.weights));
    rank.comm = std::move(comms[r]);
    rank.model = std::make_unique<MiniMaxM2>(*rank.weights, *rank.backend, rank.comm.get());
  }
  for (int r = 0; r < n; ++r) g->ranks_[r].thread = std::thread([p = g.get(), r] { p->worker(r); });
  return g;
}

TensorParallelGroup::~TensorParallelGroup() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  for (Rank& r : ranks_)
    if (r.thread.joinable()) r.thread.join();
}  // (the node group's last owner ends the other nodes' loops: ~NodeGroup)

void TensorParallelGroup::worker(int rank) {
  uint64_t seen = 0;
  for (;;) {
    const std::function<Status(int)>* job = nullptr;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
      job = job_;
    }
    // A rank that fails alone aborts the group's collectives, so that the
    // others stop (CollectiveAborted) instead of waiting for it forever.
    Status s;
    bool stopped_by_peer = false;
    try {
      s = (*job)(rank);
      if (!s.ok()) ranks_[rank].comm->abort(s.message());
    } catch (const CollectiveAborted& e) {
      s = errorf("{}", e.what()), stopped_by_peer = true;
    }
    std::lock_guard<std::mutex> lock(mu_);
    ranks_[rank].status = std::move(s);
    ranks_[rank].stopped_by_peer = stopped_by_peer;
    if (--pending_ == 0) cv_.notify_all();
  }
}

Status TensorParallelGroup::run(const std::function<Status(int rank)>& fn) {
  std::unique_lock<std::mutex> lock(mu_);
  job_ = &fn;
  pending_ = size();
  ++generation_;
  cv_.notify_all();
  cv_.wait(lock, [&] { return pending_ == 0; });
  job_ = nullptr;
  // The failure itself before the ranks it stopped; rank 0's first.
  stopped_by_peer_ = false;
  for (const Rank& r : ranks_)
    if (!r.status.ok() && !r.stopped_by_peer) return r.status;
  for (const Rank& r : ranks_)
    if (!r.status.ok()) {
      stopped_by_peer_ = true;
      return r.status;
    }
  return Status();
}

Status TensorParallelGroup::run_call(const std::function<std::vector<uint8_t>()>& call,
                                     const std::function<Status(int rank)>& fn) {
  if (!nodes_) return run(fn);
  M2_RETURN_IF_ERROR(nodes_->begin_call(call()));
  return nodes_->end_call(run(fn));
}

}  // namespace m2
