// The CPU backend: the reference implementation of every Backend op. fp32
// activations and accumulation; weights read in their stored dtype; work
// split over the global thread pool. Not thread-safe: one forward at a time.
#pragma once

#include <memory>
#include <utility>
#include <vector>

#include "backend/cpu/kernels.h"
#include "model/backend.h"
#include "util/thread_pool.h"

namespace m2::cpu {

// The kernel view of a Linear's weight.
WeightRef weight_ref(const Linear& w);
WeightRef weight_ref(const TensorView& dense);  // [rows, cols] float tensor

class CpuBackend final : public Backend {
 public:
  CpuBackend();
  explicit CpuBackend(int threads);  // on a pool of its own
  // On a pool the caller owns (a GPU backend's host experts run beside the
  // engine's use of the global pool).
  explicit CpuBackend(ThreadPool& pool);

  std::string_view name() const override { return "cpu"; }
  Status prepare_weights(ModelWeights& weights) override;
  std::shared_ptr<void> allocate(size_t bytes) override;
  void copy_to_host(const void* src, void* dst_host, size_t bytes) override;
  void copy_from_host(const void* src_host, void* dst, size_t bytes) override;

  void embed(const Weight& table, std::span<const int32_t> ids, int64_t first_id, Act out) override;
  ActCopy rms_norm(Act x, const Weight& weight, float eps, Act out) override;
  void add(Act x, Act y) override;
  void gather_rows(Act x, std::span<const int64_t> rows, Act out) override;
  void matmul(Act x, const Linear& w, Act y, const ActCopy& xc = {}) override;
  void qk_norm_rope(Act q, Act k, const Weight& q_norm, const Weight& k_norm, float eps,
                    std::span<const int32_t> positions, const RopeParams& rope) override;
  bool supports_tensor_parallel() const override { return true; }
  void qk_sum_squares(Act q, Act k, Act ss) override;
  void qk_norm_rope_sums(Act q, Act k, Act ss, double q_count, double k_count, const Weight& q_norm,
                         const Weight& k_norm, float eps, std::span<const int32_t> positions,
                         const RopeParams& rope) override;
  void kv_store(KvCache& cache, int layer, Act k, Act v, std::span<const int64_t> slots) override;
  ActCopy attention(Act q, const KvCache& cache, int layer, std::span<const SeqSlice> seqs, int num_heads,
                    float scale, Act out) override;
  void route(Act x, const Weight& gate, const Weight& bias, int top_k, float scaling, Routing out) override;
  bool supports_routing_replay() const override { return true; }
  void route_forced(Act x, const Weight& gate, const Weight& bias, int top_k, float scaling,
                    std::span<const int32_t> forced, Routing out) override;
  void moe(Act x, const LayerWeights& layer, const Routing& routing, Act out, const ActCopy& xc = {}) override;
  Status sample(Act logits, std::span<const SampleRow> rows, std::span<SampledToken> out) override;
  MemoryInfo memory_info() override;

  // y = x · Wᵀ for any weight reference (used by matmul, route, moe).
  void matmul_ref(const float* x, int64_t T, int64_t K, const WeightRef& w, int64_t N, float* y);

 private:
  // moe() of a small step (at most kSmallMoePairs (token, expert) pairs:
  // decode): every expert's rows in one parallel region per projection.
  static constexpr int64_t kSmallMoePairs = 512;
  void moe_small(Act x, const LayerWeights& layer,
                 const std::vector<std::vector<std::pair<int64_t, float>>>& by_expert, Act out);

  // Partial NeoX RoPE of q and k at `positions` (after their norms).
  void rope(Act q, Act k, std::span<const int32_t> positions, const RopeParams& rope);
  // out = x * rsqrt(sum_sq / count + eps) * w for one row (sum_sq in double, as rms_norm).
  void scale_row(const float* x, int64_t n, double sum_sq, double count, float eps, const float* w, float* out);

  std::unique_ptr<ThreadPool> own_pool_;  // a pool of its own (make_cpu_backend(threads)), else null
  const Kernels& k_;
  ThreadPool& pool_;
  std::vector<float> router_logits_;                       // [T, E]
  std::vector<float> moe_in_, moe_gate_, moe_up_, moe_out_;  // per-expert scratch
};

}  // namespace m2::cpu
