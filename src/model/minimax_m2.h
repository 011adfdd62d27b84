// The MiniMax-M2 forward pass (m2-spec.md §2), written once against the
// Backend ops. One call runs one step: any mix of prefill chunks and decode
// tokens of several sequences, whose keys and values go to and come from the
// paged KV cache.
//
// Tensor parallelism (model/tensor_parallel.h, docs/design.md): the same
// forward pass runs on each rank of a group over the rank's weight shard
// (its config has the rank's head counts), calling the rank's communicator
// where the shards meet: the QK norm's sums of squares, o_proj's and the
// MoE's partial outputs. MiniMaxM2::tensor_parallel makes one MiniMaxM2
// that drives such a group behind this same interface.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "model/backend.h"
#include "model/communicator.h"
#include "model/kv_cache.h"
#include "model/weight_shard.h"
#include "model/weights.h"

namespace m2 {

class TensorParallelGroup;
class NodeGroup;

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
  // Rank comm->rank() of a group: `weights` is its shard (shard_weights).
  MiniMaxM2(const ModelWeights& weights, Backend& backend, Communicator* comm);
  // `weights` (which must outlive the model) split over a group of
  // parallel.tensor_parallel_size ranks, rank r on make_backend(r), driven
  // in lockstep behind this interface: the KV cache it makes holds a cache
  // per rank (kv_shape is a rank's), forward returns rank 0's (gathered) logits,
  // forward_sample samples on rank 0's backend, backend() is rank 0's.
  // `make_comms`: TensorParallelGroup::create's (none: the in-process communicator).
  // With `nodes` this process holds its node's share of the ranks
  // (make_backend(r) for its local rank r): node 0 drives the group behind
  // this interface, the other nodes call follow_node_zero.
  static Result<std::unique_ptr<MiniMaxM2>> tensor_parallel(
      const ModelWeights& weights, const ParallelConfig& parallel,
      const std::function<Result<std::unique_ptr<Backend>>(int rank)>& make_backend,
      const std::function<Result<std::vector<std::unique_ptr<Communicator>>>(std::span<Backend* const>)>& make_comms = {},
      std::shared_ptr<NodeGroup> nodes = nullptr);
  ~MiniMaxM2();
  // Ranks this model's steps run on (1: no group; over every node).
  int parallel_size() const;
  // On a node other than 0 of a node group: runs node 0's calls on this
  // node's ranks until node 0 ends the job (OK, unless a call failed here) or
  // stops it or is lost (the error).
  Status follow_node_zero();
  // The node group this model's ranks span (nullptr: one node).
  NodeGroup* node_group() const;
  // Driving a group in this process: its ranks (nullptr: one rank, or a rank).
  TensorParallelGroup* group() const { return group_.get(); }

  const ModelConfig& config() const { return weights_->config; }
  const ModelWeights& weights() const { return *weights_; }
  // Serves another weight set of the same config from the next step on
  // (weight updates: the caller owns both sets and calls it between steps,
  // after the backend's prepare_weights of the new one). Not for a group
  // (parallel_size() > 1): its ranks hold shards of the weights they were
  // made with (Engine::swap_weights refuses).
  void set_weights(const ModelWeights& weights) { weights_ = &weights; }
  Backend& backend() { return backend_; }

  // The cache shape for this model.
  KvCacheShape kv_shape(int block_size, int64_t num_blocks, DType dtype) const;
  std::unique_ptr<KvCache> make_kv_cache(int block_size, int64_t num_blocks, DType dtype);

  // Sizes the step scratch (this model's activations and the backend's op
  // scratch, Backend::reserve_scratch) for the largest step within
  // `limits`, before the KV cache is allocated. Returns the bytes reserved.
  Result<size_t> reserve(const StepLimits& limits);

  // Records the decode-step graphs of every batch size up to the reserved
  // limits' max_seqs (as padded, padded_rows) at a short and a long context
  // within their max_context, as vLLM captures its graphs at start-up: a
  // server's graph memory is then spent before its first request, not as new
  // batch sizes arrive. The steps read `cache` (block 0, whatever it holds)
  // and write nothing to it; no logits. Returns how many steps it ran (0:
  // nothing reserved, the backend records no graphs, or a group).
  Result<int64_t> record_decode_graphs(KvCache& cache);

  // Runs one step and writes logits [logit_rows, vocab_size] (fp32, host;
  // null: not copied, as a group's ranks other than 0 run it).
  Status forward(const StepInput& in, KvCache& cache, std::vector<float>* logits);
  // Runs one step and samples one token from each logit row where the
  // logits are (Backend::sample): rows[i] samples in.logit_rows[i], into
  // out[i]. Only the sampled tokens and their logprobs reach the host.
  Status forward_sample(const StepInput& in, KvCache& cache, std::span<const SampleRow> rows,
                        std::span<SampledToken> out);
  // The expert ids of the last step that asked for them (capture_routing):
  // [layers, T, top_k].
  std::span<const int32_t> last_routing() const;
  // The same, calling `before_sample` once the forward pass is queued and
  // before the rows are sampled (the engine joins the task that fills the
  // rows' token masks there: the masks are built while the forward runs).
  Status forward_sample(const StepInput& in, KvCache& cache, std::span<const SampleRow> rows,
                        std::span<SampledToken> out, const std::function<void()>& before_sample);

 private:
  MiniMaxM2(const ModelWeights& weights, std::unique_ptr<TensorParallelGroup> group);
  // The step's logits [logit_rows, vocab_size] in backend memory (no rows:
  // an empty Act).
  Result<Act> run(const StepInput& in, KvCache& cache);
  Act scratch(int index, int64_t rows, int64_t cols);
  // A decode step `in` padded to Backend::graph_rows of its rows (within the
  // reserved step limits): `in` itself when there is nothing to pad, else
  // padded_, whose extra rows copy one of its rows, write no KV (slot -1)
  // and give no logits.
  const StepInput& pad_decode_step(const StepInput& in);
  // The rows a decode step of `rows` runs at: Backend::graph_rows within the
  // reserved limits, else `rows`.
  int64_t padded_rows(int64_t rows) const;

  const ModelWeights* weights_;
  Backend& backend_;
  Communicator* comm_ = nullptr;                // a rank of a group: its collectives
  std::unique_ptr<TensorParallelGroup> group_;  // driving a group: its ranks
  std::vector<int32_t> routing_host_;  // [layers, T, top_k] of the last capture
  std::vector<std::pair<std::shared_ptr<void>, size_t>> scratch_;  // grown on demand
  StepLimits reserved_;  // the limits reserve() sized the scratch for (none: 0)
  StepInput padded_;     // the last padded decode step (pad_decode_step)
};

}  // namespace m2
