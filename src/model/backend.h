// The ops the MiniMax-M2 forward pass is written against. A backend (CPU,
// CUDA) implements them over its own memory; the model code only passes
// handles around and never touches activation memory itself. Each op is
// tested on every backend against the CPU backend (tests/backend/).
//
// Activations are fp32 matrices [rows, cols] (rows = tokens of the step).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "model/communicator.h"
#include "model/kv_cache.h"
#include "model/sampling.h"
#include "model/weights.h"
#include "util/status.h"

namespace m2 {

// A dense fp32 matrix in backend memory, row stride = cols.
struct Act {
  float* data = nullptr;
  int64_t rows = 0;
  int64_t cols = 0;

  Act rows_slice(int64_t begin, int64_t end) const { return {data + begin * cols, end - begin, cols}; }
};

// A producer's own low-precision copy of the activation it just wrote,
// handed explicitly to the products that read that activation next: the
// CUDA backend's FP8 copy (e4m3 codes and a scale per 128 columns, written
// by an RMSNorm or the prefill attention beside its fp32 output), which spares
// the FP8 products their quantisation kernel. Opaque to the model; empty
// where the backend writes none (the CPU, small steps, no FP8 weights).
// It stands for `of` as the producer wrote it: pass it only with that same
// Act and before anything writes that memory. A backend checks that a copy
// is still its latest (`serial`) and is of the reader's input, and otherwise
// ignores it (the reader quantises for itself: slower, never wrong).
struct ActCopy {
  const void* codes = nullptr;
  const float* scales = nullptr;
  Act of;
  uint64_t serial = 0;
  bool empty() const { return codes == nullptr; }
};

// Per-token expert choice of the router, in backend memory: [tokens, top_k].
struct Routing {
  int32_t* expert_ids = nullptr;
  float* weights = nullptr;  // renormalised unbiased sigmoid scores
  int64_t tokens = 0;
  int top_k = 0;
};

struct RopeParams {
  int head_dim = 0;
  int rotary_dim = 0;
  double theta = 0;
};

// One sequence's slice of a step: rows [first_row, first_row + num_rows) of
// the step's activations are its tokens at positions
// [context_len - num_rows, context_len); keys come from its KV blocks.
struct SeqSlice {
  int64_t first_row = 0;
  int64_t num_rows = 0;
  int64_t context_len = 0;
  std::span<const int32_t> block_table;
};

// The largest step an engine will run (its scheduler's limits), for which a
// backend sizes its op scratch once, before the KV cache takes the rest of
// the memory (Backend::reserve_scratch).
struct StepLimits {
  int64_t max_tokens = 0;      // rows of one step (prefill chunks + decodes)
  int64_t max_seqs = 0;        // sequences in one step
  int64_t max_logit_rows = 0;  // logit rows of one step
  int64_t max_context = 0;     // tokens of context of one sequence (its cached tokens + its rows)
  KvCacheShape cache;          // the KV cache the steps read (num_blocks bounds the pages one step reads)
};

// Memory a backend allocates from, in bytes (GPU: the device's; CPU: RAM).
struct MemoryInfo {
  size_t free_bytes = 0;
  size_t total_bytes = 0;
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string_view name() const = 0;

  // Makes the weights usable by the ops (GPU: upload; CPU: nothing to do).
  virtual Status prepare_weights(ModelWeights& weights) = 0;
  // A weight update (docs/rollout.md): `next` has the structure of `served`
  // (prepared, in use); its tensors whose views differ from served's are
  // written over served's prepared copies in place and `next` takes served's
  // handles, so no memory is added and nothing that holds the copies'
  // addresses (GPU: recorded step graphs) goes stale. Called between steps.
  // CPU: nothing to copy (the ops read the views).
  virtual Status update_weights(const ModelWeights& served, ModelWeights& next) { return prepare_weights(next); }
  // Whether the ops read the weight views themselves (CPU) rather than
  // copies the backend made of them (GPU: device memory, pinned host
  // experts). When not, an update's tensors may view the files they came
  // from, since only update_weights reads them (model/weight_update.h).
  virtual bool reads_weight_views() const { return true; }
  // Memory for activations and caches; freed with the returned handle.
  virtual std::shared_ptr<void> allocate(size_t bytes) = 0;
  virtual void copy_to_host(const void* src, void* dst_host, size_t bytes) = 0;
  virtual void copy_from_host(const void* src_host, void* dst, size_t bytes) = 0;
  // Sizes every scratch buffer the ops use for the largest step within
  // `limits` now, so that no op allocates while serving (GPU: an allocation
  // mid-run also retires the recorded step graphs). Returns the bytes
  // reserved; a step beyond the limits still runs (its scratch grows, with a
  // warning). CPU: nothing to reserve.
  virtual Result<size_t> reserve_scratch(const ModelConfig& config, const StepLimits& limits) { return size_t{0}; }

  // out[i] = table[ids[i] - first_id] as fp32; a zero row where ids[i] is
  // outside the table's rows [first_id, first_id + rows) (a tensor-parallel
  // rank's share of the vocabulary, model/weight_shard.h; otherwise first_id
  // is 0 and every id is inside).
  virtual void embed(const Weight& table, std::span<const int32_t> ids, int64_t first_id, Act out) = 0;
  // out = x / rms(x) * w over each row (fp32 statistics). out may be x.
  // Returns out's copy for the products that read it (ActCopy), if any.
  virtual ActCopy rms_norm(Act x, const Weight& weight, float eps, Act out) = 0;
  // x += y
  virtual void add(Act x, Act y) = 0;
  // out[i] = x[rows[i]]
  virtual void gather_rows(Act x, std::span<const int64_t> rows, Act out) = 0;
  // y = x · Wᵀ; weights in their stored dtype, fp32 accumulation. `xc`: x's
  // copy from its producer, if it returned one.
  virtual void matmul(Act x, const Linear& w, Act y, const ActCopy& xc = {}) = 0;
  // Full-width RMSNorm of q [T, q_dim] and k [T, kv_dim] (skipped when the
  // norm weights are empty), then partial NeoX RoPE of both at `positions`.
  virtual void qk_norm_rope(Act q, Act k, const Weight& q_norm, const Weight& k_norm, float eps,
                            std::span<const int32_t> positions, const RopeParams& rope) = 0;
  // Writes k and v rows [T, kv_dim] into the cache at flat slots
  // (block * block_size + offset).
  virtual void kv_store(KvCache& cache, int layer, Act k, Act v, std::span<const int64_t> slots) = 0;
  // Causal GQA attention of q [T, heads*head_dim] over each sequence's cached
  // keys and values; out [T, heads*head_dim]. Returns out's copy, if any.
  virtual ActCopy attention(Act q, const KvCache& cache, int layer, std::span<const SeqSlice> seqs, int num_heads,
                            float scale, Act out) = 0;
  // Sigmoid router in fp32: top-k of sigmoid(x·gateᵀ) + bias, weights
  // renormalised from the unbiased scores, times `scaling`.
  virtual void route(Act x, const Weight& gate, const Weight& bias, int top_k, float scaling,
                     Routing out) = 0;
  // Routing replay (docs/rollout.md): route() except that the rows of
  // `forced` (host, [T, top_k]) whose first id is >= 0 use those experts
  // (valid and distinct: checked by the caller), each weighted by its
  // unbiased sigmoid score renormalised over the forced set, times
  // `scaling` (slime's and verl's replay); rows starting with -1 are routed
  // as route() routes them. Called only when supports_routing_replay().
  virtual bool supports_routing_replay() const { return false; }
  virtual void route_forced(Act x, const Weight& gate, const Weight& bias, int top_k, float scaling,
                            std::span<const int32_t> forced, Routing out) {
    route(x, gate, bias, top_k, scaling, out);
  }
  // out = Σ_k w_k · W2_e(silu(W1_e x) ⊙ W3_e x) over each token's experts.
  // An expert whose w1 is empty is held by another rank (expert parallelism)
  // and adds nothing here. `xc`: x's copy from its producer, if any.
  virtual void moe(Act x, const LayerWeights& layer, const Routing& routing, Act out, const ActCopy& xc = {}) = 0;
  // One token from each row of `logits` [rows.size(), vocab] (overwritten:
  // the rows' edits are applied in place) as model/sampling.h defines it;
  // only the small results come back to the host. Fails on inconsistent
  // shapes or ids outside the vocabulary.
  virtual Status sample(Act logits, std::span<const SampleRow> rows, std::span<SampledToken> out) = 0;
  virtual MemoryInfo memory_info() = 0;
  // Device memory prepare_weights took for weight copies (0: the backend
  // computes from the host views). What a rank's share of
  // --gpu-memory-utilization starts from under tensor parallelism, where
  // ranks may share a device and its free memory is not theirs alone.
  virtual size_t weight_bytes() const { return 0; }

  // ---- Tensor parallelism (model/tensor_parallel.h): a rank holds a slice
  // of the heads, and the full-width QK RMSNorm takes each row's mean of
  // squares over all ranks' slices (m2-spec §2.2c): qk_sum_squares gives this
  // rank's part, the model all-reduces it over the ranks, qk_norm_rope_sums
  // applies it. Only called when supports_tensor_parallel() (the defaults
  // do nothing; the model refuses a group on a backend without them).
  virtual bool supports_tensor_parallel() const { return false; }
  // Whether the activations (allocate()) are host memory the communicator
  // may read (CPU); else a group's collectives go through copy_to_host /
  // copy_from_host (stage_through_host, model/communicator.h).
  virtual bool activations_on_host() const { return true; }
  // ss [T, 2] fp32: (Σ_j q[t, j]², Σ_j k[t, j]²) of every row of this rank's
  // q [T, q_cols] and k [T, k_cols].
  virtual void qk_sum_squares(Act q, Act k, Act ss) {}
  // qk_norm_rope with the mean of squares of row t given, not computed over
  // the row: ss[t, 0] / q_count for q and ss[t, 1] / k_count for k (ss: the
  // all-reduced sums; q_count, k_count: the elements they sum over). A norm
  // weight (this rank's slice) that is empty skips its norm.
  virtual void qk_norm_rope_sums(Act q, Act k, Act ss, double q_count, double k_count, const Weight& q_norm,
                                 const Weight& k_norm, float eps, std::span<const int32_t> positions,
                                 const RopeParams& rope) {}

  // ---- Fused steps: by default the ops above in sequence; a backend
  // overrides them to save launches and passes over memory (CUDA decode).
  // x += y, then out = rms_norm(x) (the residual add before each norm).
  virtual ActCopy add_rms_norm(Act x, Act y, const Weight& weight, float eps, Act out) {
    add(x, y);
    return rms_norm(x, weight, eps, out);
  }
  // A tensor-parallel rank's partial sum y all-reduced over `comm`, then
  // add_rms_norm(x, y, ...): the residual add and norm after o_proj and the
  // MoE. y's contents afterwards are unspecified. A backend whose collectives
  // run on its stream fuses the three (one kernel, CUDA decode).
  virtual ActCopy all_reduce_add_rms_norm(Communicator& comm, Act x, Act y, const Weight& weight, float eps,
                                          Act out) {
    comm.all_reduce_sum(y.data, y.rows * y.cols);
    return add_rms_norm(x, y, weight, eps, out);
  }
  // The q, k and v projections of the same input.
  virtual void qkv_proj(Act x, const Linear& wq, const Linear& wk, const Linear& wv, Act q, Act k, Act v,
                        const ActCopy& xc = {}) {
    matmul(x, wq, q, xc);
    matmul(x, wk, k, xc);
    matmul(x, wv, v, xc);
  }
  // qk_norm_rope, then kv_store of the rotated k and of v.
  virtual void qk_norm_rope_store(Act q, Act k, Act v, const Weight& q_norm, const Weight& k_norm, float eps,
                                  std::span<const int32_t> positions, const RopeParams& rope, KvCache& cache,
                                  int layer, std::span<const int64_t> slots) {
    qk_norm_rope(q, k, q_norm, k_norm, eps, positions, rope);
    kv_store(cache, layer, k, v, slots);
  }

  // ---- Step graphs: the ops of a decode step recorded once per shape and
  // replayed (CUDA graphs). A backend without them runs every op eagerly.
  // The step's small host inputs, handed over before its ops so that they
  // (and any replay) read them from fixed device addresses. `context_bound`
  // bounds every sequence's context_len (a recorded step's work is sized by
  // it, so that one recording serves every context up to it).
  struct StepArrays {
    std::span<const int32_t> tokens;
    std::span<const int32_t> positions;
    std::span<const int64_t> slots;
    std::span<const SeqSlice> seqs;
    int num_heads = 0;
    int num_kv_heads = 0;
    int64_t context_bound = 0;
    int head_dim = 0;                  // of the KV cache the step's attention reads
    DType kv_dtype = DType::kBF16;
  };
  enum class GraphMode { kEager, kCapturing, kReplayed };
  // Called before the ops of every step with its arrays and, for a step that
  // may be recorded, a nonzero `graph_key` naming its shape (0: never
  // record; the backend adds what its recording depends on in `step`, e.g.
  // the context bound). Returns kReplayed (the ops recorded under the key were queued:
  // skip them), kCapturing (issue the ops, then end_graph) or kEager (issue
  // the ops; nothing is recorded).
  virtual GraphMode begin_step(uint64_t graph_key, const StepArrays& step) { return GraphMode::kEager; }
  // Ends a recording started by begin_step and queues the recorded ops.
  virtual void end_graph() {}
  // The rows a decode step of `rows` sequences is padded to so that it runs
  // from a recorded graph of one of a fixed set of sizes (vLLM's capture
  // sizes), which bounds the graphs kept; `rows` itself: no padding. The
  // model pads with copies of one of the step's rows whose logits nobody asks
  // for and whose slot is -1: a backend that pads writes no KV for them.
  virtual int64_t graph_rows(int64_t rows) const { return rows; }
  // The most decode rows begin_step records (0: none; every step runs op by
  // op); a backend that records writes no KV for a row of slot -1.
  virtual int64_t max_graph_rows() const { return 0; }
};

// Checks of Backend::sample's arguments every backend makes.
Status check_sample_args(const Act& logits, std::span<const SampleRow> rows, std::span<SampledToken> out);

// The CPU backend (backend/cpu), the reference for every other backend, on
// the process-wide thread pool.
std::unique_ptr<Backend> make_cpu_backend();
// The same on a pool of its own of `threads` threads: tensor-parallel ranks
// run side by side, and the global pool serves one caller at a time.
std::unique_ptr<Backend> make_cpu_backend(int threads);

}  // namespace m2
