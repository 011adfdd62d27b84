// Multi-node flags (torchrun's and vLLM's names) and their Kubernetes
// LeaderWorkerSet equivalents, for the commands that run a model split with
// -tp over several nodes (model/node_group.h): one m2cpp per node, node 0
// running the command (server, generation, ...), the others following its
// steps.
#pragma once

#include <CLI/CLI.hpp>

#include <string>

#include "model/node_group.h"
#include "model/weights.h"
#include "util/status.h"

namespace m2::cli {

struct NodeOptions {
  // Not given: 0 / -1 / "" / 0; then LWS_GROUP_SIZE, LWS_WORKER_INDEX,
  // LWS_LEADER_ADDRESS when set, else 1, 0, 127.0.0.1, 29500.
  int nnodes = 0;
  int node_rank = -1;
  std::string master_addr;
  int master_port = 0;
  double dist_timeout = 600;

  void add_to(CLI::App* app);
  // The flags resolved against the environment, checked (nnodes dividing
  // tensor_parallel_size, the rank within nnodes), naming the flag or
  // variable at fault.
  Result<NodeConfig> resolve(int tensor_parallel_size) const;
};

// The text every node's model must agree on (NodeIdentity::model): the
// config's shape and how the weights were made.
std::string node_model_identity(const ModelWeights& weights, const std::string& load_format, uint64_t seed,
                                const std::string& lm_head_dtype);

}  // namespace m2::cli
