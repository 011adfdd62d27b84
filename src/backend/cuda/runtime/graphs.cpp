// Decode steps as CUDA graphs. A decode step of M2 at batch 1 is ~300 short
// kernels (10 per layer); launched one by one, the gaps between them cost
// more than many of the kernels themselves. The model hands each step's
// small arrays to begin_step, which uploads them to the fixed device buffers
// the ops read; a step shape seen before in the same memory generation is
// replayed from its graph, and its second sighting is recorded (the first
// grows the scratch buffers to their final sizes, so that nothing is
// allocated while recording).
//
// A shape is the step's rows (padded to graph_sizes.h's, graph_rows) and its
// attention's class (attention_graph_class): the decode kernels divide each
// sequence's own keys among splits whose count depends on the rows only, so
// one graph serves every context length but for the choice between their
// tensor-core and SIMT kernels. The shapes recorded are thus bounded by the
// capture sizes (x 2), and the memory the graphs hold (~2 MiB each at 30
// layers) stops growing once a server has seen its batch sizes.
//
// What a recorded step depends on besides the staged arrays: weight, KV-cache
// and scratch addresses (any allocation or scratch growth bumps the memory
// generation, which retires every graph) and the shape. graphs=off
// (M2CPP_CUDA_OPTIONS) runs every step op by op.
#include <algorithm>

#include "backend/cuda/attention/attention.h"
#include "backend/cuda/runtime/backend_impl.h"
#include "backend/cuda/runtime/check.h"
#include "backend/cuda/runtime/graph_sizes.h"
#include "util/log.h"

namespace m2::cuda {
namespace {
// Recorded shapes kept (then all are dropped): every capture size in both
// decode attention classes, with room for the general kernel's buckets.
constexpr size_t kMaxGraphs = kGraphSizes * 4;
}  // namespace

uint64_t CudaBackend::attention_graph_class(const StepArrays& step) const {
  const int group = step.num_heads / step.num_kv_heads;
  const AttnPath path = attention_path(1, attention_prefill_on(options_, step.kv_dtype, step.head_dim),
                                       attention_decode_supports(step.kv_dtype, step.head_dim, group),
                                       options_.batch_invariant);
  if (path == AttnPath::kPrefill) return 0;  // no key splits
  if (path == AttnPath::kGeneral) return static_cast<uint64_t>(step.context_bound) + 2;  // splits sized by the bound
  const bool mma = decode_attention(static_cast<int64_t>(step.seqs.size()), step.num_kv_heads, step.context_bound,
                                    step.kv_dtype, step.head_dim, group, true)
                       .mma;
  return mma ? 1 : 2;
}

int64_t CudaBackend::max_graph_rows() const {
  if (!graphs_enabled_) return 0;
  // Host experts streamed to the GPU (steps above the CPU's rows) keep state
  // across steps (which layer each staging buffer holds): never recorded.
  return host_experts_ ? host_experts_->max_cpu_rows() : kMaxGraphRows;
}

int64_t CudaBackend::graph_rows(int64_t rows) const {
  // Host experts computed on the CPU would pay for the padding rows in CPU
  // time: no padding.
  if (rows > max_graph_rows() || host_experts_) return rows;
  return graph_capture_rows(rows);
}

Backend::GraphMode CudaBackend::begin_step(uint64_t graph_key, const StepArrays& step) {
  bind_device();
  context_bound_ = 0;
  if (graph_key == 0 || static_cast<int64_t>(step.tokens.size()) > max_graph_rows() || step.num_kv_heads <= 0)
    return GraphMode::kEager;
  context_bound_ = step.context_bound;

  // Room for the block tables up to the context bound, so that the work
  // list keeps its address while the contexts grow into the bucket.
  size_t table_entries = 0;
  for (const SeqSlice& s : step.seqs)
    table_entries += static_cast<size_t>((step.context_bound * static_cast<int64_t>(s.block_table.size()) +
                                          std::max<int64_t>(s.context_len, 1) - 1) /
                                         std::max<int64_t>(s.context_len, 1));
  // (+ 128: the 16-byte alignment of its 5 sections)
  attn_meta_.reserve(step.seqs.size() * (sizeof(AttnSeq) + sizeof(AttnItem)) + table_entries * sizeof(int32_t) + 128,
                     stream_);
  // Stage what the ops will upload, so that they (and a replay) find it in place.
  upload(ids_, step.tokens.data(), step.tokens.size_bytes(), "token ids");
  upload(positions_, step.positions.data(), step.positions.size_bytes(), "positions");
  upload(slots_, step.slots.data(), step.slots.size_bytes(), "slots");
  upload_attention_meta(step.seqs, step.num_heads / step.num_kv_heads, step.kv_dtype, step.head_dim);

  graph_key = graph_key << 32 | attention_graph_class(step);
  const uint64_t generation = memory_generation();
  auto it = graphs_.find(graph_key);
  if (it != graphs_.end() && it->second.generation == generation) {
    M2_CUDA_CHECK(cudaGraphLaunch(it->second.exec, stream_), "replaying the decode graph of {} tokens",
                  step.tokens.size());
    return GraphMode::kReplayed;
  }
  if (it != graphs_.end()) {
    cudaGraphExecDestroy(it->second.exec);
    graphs_.erase(it);
  }
  auto seen = seen_.find(graph_key);
  if (seen == seen_.end() || seen->second != generation) {
    seen_[graph_key] = generation;  // run eagerly once: scratch reaches its size for this shape
    return GraphMode::kEager;
  }
  if (graphs_.size() >= kMaxGraphs) {
    for (auto& [key, g] : graphs_) cudaGraphExecDestroy(g.exec);
    graphs_.clear();
  }
  M2_CUDA_CHECK(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal),
                "starting to record the decode graph of {} tokens", step.tokens.size());
  capturing_ = true;
  capture_key_ = graph_key;
  return GraphMode::kCapturing;
}

void CudaBackend::end_graph() {
  bind_device();
  cudaGraph_t graph = nullptr;
  capturing_ = false;
  M2_CUDA_CHECK(cudaStreamEndCapture(stream_, &graph),
                "recording a decode graph (M2CPP_CUDA_OPTIONS=graphs=off runs without graphs)");
  // (-v: what each recorded graph takes of device memory)
  const bool debug = log_level() <= LogLevel::kDebug;
  size_t free_before = 0, free_after = 0, total = 0;
  if (debug) cudaMemGetInfo(&free_before, &total);
  cudaGraphExec_t exec = nullptr;
  M2_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0), "instantiating a decode graph of {} nodes",
                [&] {
                  size_t n = 0;
                  cudaGraphGetNodes(graph, nullptr, &n);
                  return n;
                }());
  cudaGraphDestroy(graph);
  graphs_[capture_key_] = StepGraph{exec, memory_generation()};
  ++graphs_recorded_;
  if (debug) {
    cudaMemGetInfo(&free_after, &total);
    log_debug("decode graph of {} rows (attention class {}) recorded: {} graphs kept, {:.2f} MiB of device memory "
              "taken by this one",
              capture_key_ >> 32, capture_key_ & 0xffffffffu, graphs_.size(),
              (static_cast<double>(free_before) - static_cast<double>(free_after)) / (1 << 20));
  }
  M2_CUDA_CHECK(cudaGraphLaunch(exec, stream_), "launching a freshly recorded decode graph");
}

void CudaBackend::drop_graphs() {
  for (auto& [key, g] : graphs_) cudaGraphExecDestroy(g.exec);
  graphs_.clear();
  seen_.clear();
}

}  // namespace m2::cuda
