#include "cli/node_options.h"

#include <cstdlib>

#include "cli/flag_checks.h"

namespace m2::cli {
namespace {

// The environment variable `name` as an integer (nullopt: unset).
Result<std::optional<int>> env_int(const char* name) {
  const char* v = std::getenv(name);
  if (!v || !*v) return std::optional<int>();
  char* end = nullptr;
  const long n = std::strtol(v, &end, 10);
  if (*end != '\0' || n < 0 || n > 1 << 20) return errorf("{}={}: not a non-negative integer", name, v);
  return std::optional<int>(static_cast<int>(n));
}

}  // namespace

void NodeOptions::add_to(CLI::App* app) {
  app->add_option("--nnodes", nnodes,
                  "Nodes the -tp ranks are spread over, one m2cpp per node (default: LWS_GROUP_SIZE, else 1)")
      ->check(int_range(1, 1024));
  app->add_option("--node-rank", node_rank,
                  "This node's index 0..nnodes-1; node 0 runs the command, the others follow its steps (default: "
                  "LWS_WORKER_INDEX, else 0)")
      ->check(int_range(0, 1023));
  app->add_option("--master-addr", master_addr,
                  "Node 0's address, where it listens and the others connect (default: LWS_LEADER_ADDRESS, else "
                  "127.0.0.1)");
  app->add_option("--master-port", master_port, "Node 0's port (default 29500)")->check(int_range(1, 65535));
  app->add_option("--dist-timeout", dist_timeout,
                  "Seconds the nodes wait for each other: to join, and within a step (default 600)")
      ->check(positive_number(1e6));
}

Result<NodeConfig> NodeOptions::resolve(int tensor_parallel_size) const {
  NodeConfig c;
  M2_ASSIGN_OR_RETURN(const std::optional<int> lws_size, env_int("LWS_GROUP_SIZE"));
  M2_ASSIGN_OR_RETURN(const std::optional<int> lws_index, env_int("LWS_WORKER_INDEX"));
  c.nnodes = nnodes > 0 ? nnodes : lws_size.value_or(1);
  c.node_rank = node_rank >= 0 ? node_rank : lws_index.value_or(0);
  const char* leader = std::getenv("LWS_LEADER_ADDRESS");
  c.master_addr = !master_addr.empty() ? master_addr : leader && *leader ? leader : "127.0.0.1";
  c.master_port = master_port > 0 ? master_port : 29500;
  c.timeout_s = dist_timeout;
  const char* size_from = nnodes > 0 ? "--nnodes" : lws_size ? "LWS_GROUP_SIZE" : "--nnodes";
  const char* rank_from = node_rank >= 0 ? "--node-rank" : lws_index ? "LWS_WORKER_INDEX" : "--node-rank";
  if (c.nnodes < 1) return errorf("{} {}: at least 1", size_from, c.nnodes);
  if (c.node_rank >= c.nnodes)
    return errorf("{} {} is outside 0..{} ({} {})", rank_from, c.node_rank, c.nnodes - 1, size_from, c.nnodes);
  if (c.nnodes > 1 && tensor_parallel_size % c.nnodes != 0)
    return errorf("--tensor-parallel-size {} over {} {}: every node holds the same number of ranks, so it must be a "
                  "multiple of {}",
                  tensor_parallel_size, size_from, c.nnodes, c.nnodes);
  return c;
}

std::string node_model_identity(const ModelWeights& weights, const std::string& load_format, uint64_t seed,
                                const std::string& lm_head_dtype) {
  const ModelConfig& c = weights.config;
  return fmt::format("{} layers, hidden {}, {} q / {} kv heads of {}, {} experts top {} of {}, vocab {}, {}, {} "
                     "weights{}, lm_head {}",
                     c.num_hidden_layers, c.hidden_size, c.num_attention_heads, c.num_key_value_heads, c.head_dim,
                     c.num_local_experts, c.num_experts_per_tok, c.intermediate_size, c.vocab_size,
                     c.fp8 ? "FP8" : "BF16", load_format,
                     load_format == "dummy" ? fmt::format(" (seed {})", seed) : std::string(), lm_head_dtype);
}

}  // namespace m2::cli
