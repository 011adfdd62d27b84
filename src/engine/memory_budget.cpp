#include "engine/memory_budget.h"

#include <algorithm>
#include <limits>
#include <map>

namespace m2 {
namespace {
double gib(int64_t bytes) { return static_cast<double>(bytes) / (1ll << 30); }
}  // namespace

int64_t activation_reserve_bytes(const ModelConfig& c, int64_t max_tokens, int64_t max_rows) {
  const int64_t H = c.hidden_size, I = c.intermediate_size, k = c.num_experts_per_tok;
  // Per token, fp32: x, h, out (H each), q and attention output (q_dim), k
  // and v (kv_dim), router logits, and the MoE's per-(token, expert)
  // activations (gate, up, product: 3 x I) and outputs (H).
  const int64_t per_token = 3 * H + 2 * c.q_dim() + 2 * c.kv_dim() + c.num_local_experts + k * (3 * I + H);
  // Logit rows twice (the lm_head output and a sampling/gather copy).
  const int64_t logits = 2 * max_rows * static_cast<int64_t>(c.vocab_size);
  return (max_tokens * per_token + logits) * static_cast<int64_t>(sizeof(float)) + (1ll << 30);
}

Result<int64_t> kv_cache_budget(double utilization, int64_t total_bytes, int64_t weight_bytes,
                                int64_t activation_bytes) {
  if (!(utilization > 0.0 && utilization <= 1.0))
    return errorf("--gpu-memory-utilization must be in (0, 1], got {}", utilization);
  const int64_t budget = static_cast<int64_t>(utilization * static_cast<double>(total_bytes));
  if (weight_bytes > budget)
    return errorf("the weights take {:.2f} GiB, more than --gpu-memory-utilization {} of the device's {:.2f} GiB "
                  "({:.2f} GiB)",
                  gib(weight_bytes), utilization, gib(total_bytes), gib(budget));
  const int64_t left = budget - weight_bytes - activation_bytes;
  if (left <= 0)
    return errorf("--gpu-memory-utilization {} ({:.2f} of {:.2f} GiB) leaves no KV cache: weights {:.2f} GiB + "
                  "activation reserve {:.2f} GiB; raise it or lower --max-num-batched-tokens / --max-num-seqs",
                  utilization, gib(budget), gib(total_bytes), gib(weight_bytes), gib(activation_bytes));
  return left;
}

Result<int64_t> kv_cache_budget_per_rank(double utilization, std::span<const RankMemory> ranks,
                                         int64_t activation_bytes) {
  if (ranks.empty()) return errorf("kv_cache_budget_per_rank: no ranks");
  struct Device {
    int64_t total = 0, weights = 0, ranks = 0;
  };
  std::map<int, Device> devices;
  for (const RankMemory& r : ranks) {
    Device& d = devices[r.device];
    d.total = r.total_bytes, d.weights += r.weight_bytes, ++d.ranks;
  }
  int64_t least = std::numeric_limits<int64_t>::max();
  for (const auto& [device, d] : devices) {
    const int64_t n = d.ranks;
    auto left = kv_cache_budget(utilization, d.total, d.weights, n * activation_bytes);
    if (!left.ok())
      return left.status().with_context(
          fmt::format("GPU {} ({} rank{} of the group)", device, n, n > 1 ? "s" : ""));
    least = std::min(least, *left / n);
  }
  return least;
}

}  // namespace m2
