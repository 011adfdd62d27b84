// The MiniMax-M2 forward pass (m2-spec.md §2), written once against the
// Backend ops. One call runs one step: any mix of prefill chunks and decode
// tokens of several sequences, whose keys and values go to and come from the
// paged KV cache.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "model/backend.h"
#include "model/kv_cache.h"
#include "model/weights.h"

namespace m2 {

struct StepInput {
  std::vector<int32_t> tokens;      // [T]
  std::vector<int32_t> positions;   // [T] absolute positions (0-based)
  std::vector<int64_t> slots;       // [T] KV-cache slot of each token
  std::vector<SeqSlice> seqs;       // which rows belong to which sequence
  std::vector<int64_t> logit_rows;  // rows whose next-token logits are wanted
  // Routing capture and replay (docs/rollout.md). capture_routing: every
  // layer's top-k expert ids of every row come back to the host
  // (MiniMaxM2::last_routing). forced_experts: empty, or [layers, T, top_k]
  // expert ids the MoE uses instead of the router's choice; a row whose first
  // id is -1 is routed freely. Either one makes the step run eagerly (no
  // graph replay).
  bool capture_routing = false;
  std::vector<int32_t> forced_experts;
};

class MiniMaxM2 {
 public:
  MiniMaxM2(const ModelWeights& weights, Backend& backend);

  const ModelConfig& config() const { return weights_->config; }
  const ModelWeights& weights() const { return *weights_; }
  // Serves another weight set of the same config from the next step on
  // (weight updates: the caller owns both sets and calls it between steps,
  // after the backend's prepare_weights of the new one).
  void set_weights(const ModelWeights& weights) { weights_ = &weights; }
  Backend& backend() { return backend_; }

  // The cache shape for this model.
  KvCacheShape kv_shape(int block_size, int64_t num_blocks, DType dtype) const;
  std::unique_ptr<KvCache> make_kv_cache(int block_size, int64_t num_blocks, DType dtype);

  // Sizes the step scratch (this model's activations and the backend's op
  // scratch, Backend::reserve_scratch) for the largest step within
  // `limits`, before the KV cache is allocated. Returns the bytes reserved.
  Result<size_t> reserve(const StepLimits& limits);

  // Runs one step and writes logits [logit_rows, vocab_size] (fp32, host).
  Status forward(const StepInput& in, KvCache& cache, std::vector<float>* logits);
  // Runs one step and samples one token from each logit row where the
  // logits are (Backend::sample): rows[i] samples in.logit_rows[i], into
  // out[i]. Only the sampled tokens and their logprobs reach the host.
  Status forward_sample(const StepInput& in, KvCache& cache, std::span<const SampleRow> rows,
                        std::span<SampledToken> out);
  // The expert ids of the last step that asked for them (capture_routing):
  // [layers, T, top_k].
  std::span<const int32_t> last_routing() const { return routing_host_; }
  // The same, calling `before_sample` once the forward pass is queued and
  // before the rows are sampled (the engine joins the task that fills the
  // rows' token masks there: the masks are built while the forward runs).
  Status forward_sample(const StepInput& in, KvCache& cache, std::span<const SampleRow> rows,
                        std::span<SampledToken> out, const std::function<void()>& before_sample);

 private:
  // The step's logits [logit_rows, vocab_size] in backend memory (no rows:
  // an empty Act).
  Result<Act> run(const StepInput& in, KvCache& cache);
  Act scratch(int index, int64_t rows, int64_t cols);

  const ModelWeights* weights_;
  Backend& backend_;
  std::vector<int32_t> routing_host_;  // [layers, T, top_k] of the last capture
  std::vector<std::pair<std::shared_ptr<void>, size_t>> scratch_;  // grown on demand
};

}  // namespace m2
