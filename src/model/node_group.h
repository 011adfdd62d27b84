// The nodes of a multi-node tensor-parallel model: one process per node, each
// driving its own ranks (model/tensor_parallel.h), linked over TCP in a star
// around node 0 (torchrun's and vLLM's names: --nnodes, --node-rank,
// --master-addr, --master-port).
//
// Node 0 runs the engine: for each group step (a "call": reserve, make the KV
// cache, forward) it sends the call to every other node, runs it on its own
// ranks and reads each node's status. The other nodes run node 0's calls in
// order until it ends them (follow_node_zero in MiniMaxM2). Within a call the
// ranks' collectives meet across nodes through exchange(): each node's first
// rank sends its node's buffers to node 0, which combines them (sums in
// global rank order: the in-process communicator's bits) and sends the result
// back (make_node_communicators).
//
// Failures never hang: the rendezvous and every wait of a collective have a
// timeout; a node whose step fails tells node 0 (its status), node 0 tells
// the others (an abort), and a node that dies closes its sockets, which the
// others see at once. After any failure the group refuses further calls.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <span>
#include <string>
#include <vector>

#include "model/communicator.h"
#include "util/status.h"
#include "util/tcp.h"

namespace m2 {

// Raised on any change to the messages between nodes.
inline constexpr int kNodeProtocol = 1;

struct NodeConfig {
  int nnodes = 1;
  int node_rank = 0;
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;  // torchrun's default
  double timeout_s = 600;   // the rendezvous, and each wait for another node within a step
};

// What every node must agree on; node 0 refuses a node whose values differ,
// naming them, and the job stops on every node.
struct NodeIdentity {
  int protocol = kNodeProtocol;
  std::string version;  // m2cpp's version
  int tensor_parallel_size = 1;
  bool expert_parallel = false;
  std::string model;  // the model's shape and weights, as text (ModelOptions says what)
};

// A collective as node 0 checks it: the same op and sizes on every node.
struct CollectiveHeader {
  uint32_t op = 0;     // Communicator's operation (node_communicator.cpp)
  int32_t root = 0;    // broadcast's root rank
  uint64_t bytes = 0;  // the logical size (all nodes alike)
};

class NodeGroup {
 public:
  // Node 0 listens on master_addr:master_port and waits for nnodes - 1 others
  // to connect; the others connect to it (retrying until it listens). Each
  // within config.timeout_s.
  static Result<std::unique_ptr<NodeGroup>> rendezvous(const NodeConfig& config, const NodeIdentity& mine);
  // Node 0 on a listener already bound (tests: port 0).
  static Result<std::unique_ptr<NodeGroup>> lead(TcpListener listener, const NodeConfig& config,
                                                 const NodeIdentity& mine);
  ~NodeGroup();

  int nnodes() const { return config_.nnodes; }
  int node_rank() const { return config_.node_rank; }
  const NodeConfig& config() const { return config_; }

  // --- node 0 ---
  // Sends a call to every other node; refused once the group has failed.
  Status begin_call(std::span<const uint8_t> call);
  // After this node's ranks ran the call (`local`: their status): tells the
  // others to stop if anything failed, reads every node's status and returns
  // the failure that started it (a node's own error before those of nodes it
  // stopped), else OK.
  Status end_call(const Status& local);
  // Whether every other node is still connected (a node that died between
  // calls has closed its link): checked without waiting.
  Status check_alive();
  // Calls on_lost (once, from a thread of its own or the caller's) when a node
  // is lost: between calls, within ~0.25 s of its death (a server idles for
  // hours between steps), or within a call.
  void watch(std::function<void(const Status&)> on_lost);
  // The group's failure (OK: none so far).
  Status failure() const;
  // Ends the other nodes' loops (next_call returns nullopt there).
  void shutdown();

  // --- the other nodes ---
  // Node 0's next call (waits without limit: a server may idle), nullopt once
  // node 0 shuts the group down, or an error: node 0 stopped the job or was
  // lost.
  Result<std::optional<std::vector<uint8_t>>> next_call();
  // This node's status for the call just run (stopped_by_peer: its ranks
  // were stopped by another node's failure).
  Status reply(const Status& status, bool stopped_by_peer);

  // --- within a call: each node's first rank ---
  // Combines every node's contribution (node 0's `combine`, given them in
  // node order) and returns the result, the same bytes on every node. An
  // error: a node failed or was lost, or the nodes called different
  // collectives; the group has failed (the caller stops its ranks).
  using Combine = std::function<std::vector<uint8_t>(std::span<const std::span<const uint8_t>> per_node)>;
  Result<std::vector<uint8_t>> exchange(const CollectiveHeader& header, std::span<const uint8_t> mine,
                                        const Combine& combine);

 private:
  struct Link;  // node 0: one per other node; the others: one, to node 0
  NodeGroup() = default;
  Status fail(Status why, bool from_peer);  // records the group's failure, aborts the others (node 0)
  void abort_others(const std::string& why);
  Status lost(int node, const Status& why);
  // A node's kStatus for the current call (its code, then its message) into its link.
  static void take_status(Link& l, std::span<const uint8_t> payload);
  Status check_alive_locked();
  void report_lost(const Status& why);

  NodeConfig config_;
  std::vector<std::unique_ptr<Link>> links_;
  Status broken_;                // the group's first failure
  bool broken_by_peer_ = false;  // ... which another node reported
  bool shut_down_ = false;
  // The watcher reads the links only between calls (in_call_ false).
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool in_call_ = false;
  bool stop_watch_ = false;
  std::function<void(const Status&)> on_lost_;
  bool lost_reported_ = false;
  std::thread watcher_;
};

// Communicators for this node's ranks of a group of `global_size` ranks over
// `nodes` (global_size / nnodes ranks per node; communicator l is global rank
// node_rank * local + l). Within a node the ranks meet in the in-process
// communicator; across nodes through nodes.exchange. Host buffers.
std::vector<std::unique_ptr<Communicator>> make_node_communicators(std::shared_ptr<NodeGroup> nodes,
                                                                   int global_size);

}  // namespace m2
