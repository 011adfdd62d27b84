// The CUDA backend's class (private to backend/cuda/). Ops queue kernels on
// one stream and return at once; copy_to_host waits for them.
#pragma once

#include <cuda_runtime.h>

#include <deque>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "backend/cuda/attention/attention.h"
#include "backend/cuda/attention/attention_plan.h"
#include "backend/cuda/attention/bf16_convert.h"
#include "backend/cuda/attention/flashinfer_prefill.h"
#include "backend/cuda/attention/qk_norm_rope.h"
#include "backend/cuda/elementwise/elementwise.h"
#include "backend/cuda/gemm/bf16_matmul.h"
#include "backend/cuda/gemm/fp8_gemm.h"
#include "backend/cuda/gemm/matmul.h"
#include "backend/cuda/gemm/matmul_plan.h"
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/moe/host_experts.h"
#include "backend/cuda/moe/moe.h"
#include "backend/cuda/moe/moe_plan.h"
#include "backend/cuda/moe/route.h"
#include "backend/cuda/moe/route_gemm.h"
#include "backend/cuda/runtime/check.h"
#include "backend/cuda/runtime/device_buffer.h"
#include "backend/cuda/runtime/device_caps.h"
#include "backend/cuda/runtime/device_kernels.h"
#include "backend/cuda/runtime/dummy_fill.h"
#include "backend/cuda/runtime/fp8_act_copy.h"
#include "backend/cuda/runtime/op_profile.h"
#include "backend/cuda/runtime/roofline.h"
#include "backend/cuda/sampling/sampling.h"
#include "model/backend.h"
#include "model/weight_stream.h"

namespace m2::cuda {

class CudaBackend final : public Backend {
 public:
  // `arch`: probe_cuda_arch(device), which decides the kernels it may launch.
  CudaBackend(int device, const CudaArch& arch, const CudaOptions& options);
  ~CudaBackend() override;

  std::string_view name() const override { return "cuda"; }
  Status prepare_weights(ModelWeights& weights) override;
  Status update_weights(const ModelWeights& served, ModelWeights& next) override;  // runtime/weights.cpp
  bool reads_weight_views() const override { return false; }
  std::shared_ptr<void> allocate(size_t bytes) override;
  void copy_to_host(const void* src, void* dst_host, size_t bytes) override;
  void copy_from_host(const void* src_host, void* dst, size_t bytes) override;
  Result<size_t> reserve_scratch(const ModelConfig& config, const StepLimits& limits) override;  // backend_scratch.cpp

  void embed(const Weight& table, std::span<const int32_t> ids, int64_t first_id, Act out) override;
  ActCopy rms_norm(Act x, const Weight& weight, float eps, Act out) override;
  void add(Act x, Act y) override;
  void gather_rows(Act x, std::span<const int64_t> rows, Act out) override;
  void matmul(Act x, const Linear& w, Act y, const ActCopy& xc = {}) override;
  void qk_norm_rope(Act q, Act k, const Weight& q_norm, const Weight& k_norm, float eps,
                    std::span<const int32_t> positions, const RopeParams& rope) override;
  // Tensor parallelism (one rank's heads): the QK kernel's two phases apart.
  bool supports_tensor_parallel() const override { return true; }
  bool activations_on_host() const override { return false; }
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
  ActCopy add_rms_norm(Act x, Act y, const Weight& weight, float eps, Act out) override;
  // One kernel over a peer communicator (runtime/peer_communicator.cpp), the
  // default's all-reduce then add_rms_norm otherwise.
  ActCopy all_reduce_add_rms_norm(Communicator& comm, Act x, Act y, const Weight& weight, float eps,
                                  Act out) override;
  void qkv_proj(Act x, const Linear& wq, const Linear& wk, const Linear& wv, Act q, Act k, Act v,
                const ActCopy& xc = {}) override;
  void qk_norm_rope_store(Act q, Act k, Act v, const Weight& q_norm, const Weight& k_norm, float eps,
                          std::span<const int32_t> positions, const RopeParams& rope, KvCache& cache, int layer,
                          std::span<const int64_t> slots) override;

  // Step graphs (cuda_graphs.cpp).
  GraphMode begin_step(uint64_t graph_key, const StepArrays& step) override;
  void end_graph() override;
  int64_t graph_rows(int64_t rows) const override;
  int64_t max_graph_rows() const override;
  int64_t graphs_recorded() const { return graphs_recorded_; }
  // What a recorded step of `step`'s arrays depends on besides its rows
  // (graphs.cpp): 0 (prefill kernel), 1 / 2 (decode kernels: tensor cores /
  // SIMT), else 2 + the context bound (the general kernel's splits).
  uint64_t attention_graph_class(const StepArrays& step) const;
  void drop_graphs();
  Status sample(Act logits, std::span<const SampleRow> rows, std::span<SampledToken> out) override;  // cuda_sampling.cpp
  MemoryInfo memory_info() override;
  size_t weight_bytes() const override { return weight_bytes_; }

  cudaStream_t stream() const { return stream_; }
  int device() const { return device_; }
  int64_t fp8_copies_used() const { return fp8_copy_.uses(); }
  HostExpertInfo host_expert_info() const {
    if (!host_experts_) return {};
    return {host_expert_layers_, host_experts_->threads(), host_experts_->max_cpu_rows(),
            host_experts_->cpu_seconds(), host_experts_->cpu_calls()};
  }

 private:
  // sample() without sm_90 code: the logits to the host, model/sampling.h's reference there.
  Status sample_on_host(Act logits, std::span<const SampleRow> rows, std::span<SampledToken> out);

  // Weight uploads (runtime/weights.cpp). `Uploads`: the host tensors
  // uploaded by this prepare_weights call, so that one under two names
  // (tied embeddings) is copied once.
  using Uploads = std::unordered_map<const void*, const PreparedTensor*>;
  Status upload_view(Weight& t, const char* what, Uploads& uploads);
  Status upload_linear(Linear& l, const char* what, Uploads& uploads);
  // `on_host`: into pinned host memory (host_experts_) instead.
  Status upload_experts(LayerWeights& layer, int index, bool on_host);
  // How many leading layers keep their experts on the host
  // (CudaOptions::cpu_moe_layers, auto resolved against free memory).
  Result<int> host_expert_layers(const ModelWeights& w, size_t free_bytes, size_t total_bytes) const;
  // The MoE of `experts` (device memory) over x (its copy xc) and routing.
  void moe_on(Act x, const DeviceExperts& experts, const Routing& routing, Act out, const ActCopy& xc);
  // The MoE of a layer whose experts are on the host (moe/host_experts.h).
  void moe_host(Act x, const PreparedExperts& layer, const Routing& routing, Act out, const ActCopy& xc);
  // q, k and v of a layer in one allocation (rows stacked), so that decode
  // streams them in one pass; false when their shapes do not allow it.
  Status upload_qkv(LayerWeights& layer, const char* what, Uploads& uploads, bool* fused);
  // Whether a weight's handle is one of this backend's records.
  bool owns(Prepared p) const;
  const PreparedTensor* record(const DeviceWeight& w);
  Status device_alloc(size_t bytes, const char* what, uint8_t** out);
  // Queues the upload of `src` to `dst`; prepare_weights streams the queue.
  void queue_copy(void* dst, const TensorView& src, std::string_view what);
  void queue_copy(void* dst, const Linear& l, std::string_view what);  // its weight (rows packed)

  // What plan_matmul is told of y = x · Wᵀ.
  MatmulShape matmul_shape(const Act& x, const DeviceWeight& d, const Act& y) const;

  // Device copies of prepared weights, from their handles; a weight not
  // prepared by this backend stops the process.
  const PreparedTensor& prepared(Prepared p, const TensorView& t, const char* op, const char* what) const;
  const void* device_view(const Weight& t, const char* op) const;
  const DeviceWeight& device_weight(const Linear& l, const char* op) const;

  // The attention work list of `seqs` (sequences, items, block tables packed
  // into attn_meta_host_) uploaded to attn_meta_; returns its device copy.
  struct AttnMeta {
    const uint8_t* device = nullptr;
    size_t seq_off = 0, item_off = 0, table_off = 0, prefill_off = 0, decode_off = 0;
    int64_t num_items = 0, num_prefill_items = 0, num_decode_items = 0;
    int64_t max_keys = 0, max_decode_keys = 0;  // of the general kernel's, the decode kernel's sequences
    std::vector<AttnSeq> seqs;                   // host copies of the uploaded sequences (one per slice)
    std::vector<int32_t> prefill_seqs;           // those of the prefill items (indices into seqs)
  };
  AttnMeta upload_attention_meta(std::span<const SeqSlice> seqs, int group, DType cache_dtype, int head_dim);
  // The prefill items' sequences (meta.prefill_seqs) by FlashInfer's kernel:
  // q to bf16, the kernel, o back to fp32 (and out8). `a` holds the caches
  // and the uploaded block tables; `seqs` the host block tables (FP8 pages).
  void attention_prefill_flashinfer(Act q, const AttnMeta& meta, std::span<const SeqSlice> seqs,
                                    const AttentionArgs& a, int heads, Fp8Out out8, Act out);
  // Key splits of `items` work items x kv heads over at most max_keys keys
  // (keys per split a multiple of `granule`): enough blocks to fill the GPU.
  void size_splits(AttentionArgs& a, int64_t items, int64_t max_keys, int granule) const;
  // The decode kernels' splits and kernel for `seqs` one-row sequences whose
  // longest has `max_keys` keys; `recordable`: a step that may be recorded
  // (attention_splits_recorded: the count whatever the contexts). The one
  // rule attention() launches by and attention_graph_class keys graphs by.
  struct DecodeAttention {
    AttentionSplits splits;
    bool mma = false;  // the tensor-core kernel, else the SIMT one
  };
  DecodeAttention decode_attention(int64_t seqs, int kv_heads, int64_t max_keys, DType dtype, int head_dim, int group,
                                   bool recordable) const;
  // A small host array's device copy; while a graph is being recorded the
  // bytes must be those staged by begin_step (a copy cannot be recorded).
  const void* upload(DeviceArray& array, const void* host, size_t bytes, const char* what);

  // Brackets an op's launches for the per-op profile (CudaOptions::profile);
  // `key()` (op and shape) is only built then.
  template <class Key>
  OpProfile::Scope timed(Key key) {
    return profile_ ? OpProfile::Scope(profile_.get(), stream_, key()) : OpProfile::Scope();
  }

  // The start of every op: makes device_ the calling thread's current
  // device (ops may come from any thread).
  void bind_device() const;
  // Where a producer about to write `out` also writes out's FP8 copy (and
  // `*handle` the ActCopy it returns for it), or none (null q, empty handle)
  // when no FP8 product would read it: the FP8 paths off (fp8_gemm=off, a
  // device without them), no FP8 weights, fewer than kFp8GemmMinTokens rows
  // (products of fewer stream fp32 activations), columns not a multiple of
  // 128, or out not 16-byte aligned.
  Fp8Out fp8_copy_for(const Act& out, ActCopy* handle);
  // After a launch: stop with `context()` if it failed (and, with
  // CudaOptions::sync_each_op, if the kernel itself failed).
  template <class Context>
  void check(cudaError_t launch, const char* op, const Context& context) {
    if (launch == cudaSuccess && sync_each_op_ && !capturing_) launch = cudaStreamSynchronize(stream_);
    if (launch != cudaSuccess) die(launch, op, context(), __FILE__, __LINE__);
  }

  int device_ = 0;
  CudaOptions options_;
  CudaFeatures features_;  // what this device may run (declared before fp8_matmul_, which reads it)
  int num_sms_ = 0;
  DeviceCaps caps_;  // what the plans read
  bool sync_each_op_ = false;
  cudaStream_t stream_ = nullptr;

  std::vector<void*> weight_memory_;      // owned device allocations
  size_t weight_bytes_ = 0;               // their bytes
  // The records the weights' handles point at (deques: stable addresses).
  std::deque<PreparedTensor> tensors_;
  std::deque<PreparedExperts> experts_;
  // Layers whose experts stay in host memory, in layer order (issue 22).
  std::unique_ptr<HostExpertRuntime> host_experts_;
  int host_expert_layers_ = 0;  // of the last prepare_weights
  std::deque<DeviceWeight> stacks_;       // layers' stacked q|k|v (PreparedTensor::qkv)
  bool has_fp8_weights_ = false;
  std::vector<WeightCopy> pending_copies_;  // prepare_weights' queued uploads

  // Step graphs: one executable graph per key, valid for the memory
  // generation it was recorded in; a key is recorded the second time it is
  // seen in a generation (the first run grows the scratch buffers).
  struct StepGraph {
    cudaGraphExec_t exec = nullptr;
    uint64_t generation = 0;
  };
  std::unordered_map<uint64_t, StepGraph> graphs_;
  std::unordered_map<uint64_t, uint64_t> seen_;  // key -> generation of its last eager run
  std::unique_ptr<OpProfile> profile_;  // CudaOptions::profile
  bool graphs_enabled_ = true;
  int64_t graphs_recorded_ = 0;  // over the backend's life (cuda_graphs_recorded)
  bool tc_attention_ = true;  // prefill attention, and decode batches that need no key split, on tensor cores
  // Prefill attention by FlashInfer's Hopper kernel (flashinfer_prefill.h;
  // FP8 caches through bf16 copies of their pages) where built, unless
  // attn_prefill=mma.
  bool flashinfer_prefill_ = false;
  // The decode kernel for steps whose keys are split (attention_decode_on_mma;
  // CudaOptions::split_decode forces one).
  SplitDecode split_decode_ = SplitDecode::kAuto;
  bool capturing_ = false;
  uint64_t capture_key_ = 0;
  int64_t context_bound_ = 0;  // of the current step (sizes the attention key splits)

  Fp8Matmul fp8_matmul_{fp8_gemm_mode_for(options_.fp8_gemm, features_)};  // FP8 weights x many tokens
  Fp8ActCopy fp8_copy_{options_.fused_quant};  // producers' FP8 copies
  DeviceArray forced_ids_{"forced expert ids", false};  // route_forced (its steps are never recorded)
  DeviceArray ids_{"token ids"}, rows_{"logit rows"}, positions_{"positions"}, slots_{"KV slots"},
      attn_meta_{"attention work list"};
  DeviceBuffer route_logits_{"router logits"}, route_counters_{"router counters"}, moe_scratch_{"MoE scratch"},
      moe_counters_{"MoE decode counters"}, moe_local_routing_{"expert-parallel routing"},
      attn_partials_{"attention split partials"},
      attn_decode_partials_{"decode attention split partials"}, attn_counters_{"decode attention split counters"};
  // FlashInfer's prefill attention: its work plan, bf16 copies of q and o,
  // and for FP8 caches the pages it reads, copied to bf16.
  FlashInferPlan fi_plan_;
  std::vector<int32_t> fi_pages_host_, fi_tables_host_;
  // Per cache block: the call that last copied it (stamp) and its page in the copies.
  std::vector<std::pair<uint64_t, int32_t>> fi_page_slot_;
  uint64_t fi_page_stamp_ = 0;
  DeviceArray fi_plan_device_{"FlashInfer plan"}, fi_pages_device_{"FlashInfer page ids"};
  DeviceBuffer fi_q_{"FlashInfer q"}, fi_o_{"FlashInfer o"}, fi_k_{"FlashInfer k pages"}, fi_v_{"FlashInfer v pages"};
  std::vector<uint8_t> attn_meta_host_;
  // The sampler's (sampling/backend_sampling.cpp), after the step's graph.
  DeviceArray sample_args_{"sampling rows", false}, sample_edits_{"sampling edits", false},
      sample_masks_{"sampling token masks", false};
  DeviceBuffer sample_results_{"sampling results", false};
  std::vector<SampleRowResult> sample_results_host_;
  Bf16Matmul bf16_matmul_{options_.bf16_gemm};  // BF16 weights x many tokens (bf16_matmul.h)
  RouteGemm route_gemm_{options_.route_gemm};    // the router's logits for many tokens (route_gemm.h)
  std::vector<float> sample_logits_host_;  // sample_on_host
};

}  // namespace m2::cuda
