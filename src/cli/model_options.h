// Flags shared by the commands that load a model (-m, --load-format, ...).
#pragma once

#include <CLI/CLI.hpp>

#include <memory>
#include <string>

#include "cli/node_options.h"
#include "model/backend.h"
#include "model/minimax_m2.h"
#include "model/weights.h"
#include "util/status.h"
#ifdef M2CPP_WITH_CUDA
#include "backend/cuda/runtime/cuda_options.h"
#endif

namespace m2::cli {

// Weights made usable by a backend.
struct LoadedModel {
  std::unique_ptr<ModelWeights> weights;
  std::unique_ptr<Backend> backend;
  int64_t weight_bytes = 0;  // backend memory the weights took (measured; 0 on the CPU)
};


struct ModelOptions {
  std::string model;              // directory, or config.json for dummy weights
  std::string load_format = "auto";
  int num_layers = -1;
  uint64_t seed = 0;
  int threads = 0;
  std::string device = "cpu";
  double gpu_memory_utilization = 0;  // 0: not given
  std::string cuda_options;           // --cuda-options (backend/cuda/runtime/cuda_options.h)
  bool batch_invariant = false;       // --batch-invariant (vLLM's name): CudaOptions::batch_invariant; the CPU always is
  // Routed experts in host memory (model/expert_placement.h; llama.cpp's flags).
  bool cpu_moe = false;               // --cpu-moe: every layer's
  std::string n_cpu_moe;              // --n-cpu-moe N|auto: the first N layers', or as many as the GPU needs
  int cpu_moe_max_tokens = 48;        // --cpu-moe-max-tokens: above, host experts are streamed to the GPU (measured: perf.md)
  // What --n-cpu-moe auto keeps of the GPU besides the weights, set by the
  // command from its own flags: a KV cache of `auto_kv_tokens` tokens
  // (--max-model-len x --max-num-seqs) and the activations of its largest step.
  int64_t auto_kv_tokens = 32768;
  std::string auto_kv_dtype = "auto";
  int64_t auto_step_tokens = 8192;
  int64_t auto_logit_rows = 256;
  int tensor_parallel_size = 1;       // --tensor-parallel-size/-tp (add_parallel_to)
  bool enable_expert_parallel = false;
  NodeOptions nodes;                  // --nnodes, --node-rank, ... (add_parallel_to)
  std::string lm_head_dtype = "bf16";  // bf16: as stored; fp8: quantised at load (model/lm_head_quant.h)

  void add_to(CLI::App* app, bool model_required = true);
  // -tp/--tensor-parallel-size, --enable-expert-parallel and the multi-node
  // flags (NodeOptions), for the commands that run the model through make_model.
  void add_parallel_to(CLI::App* app);
  // What can be checked before anything loads: -m exists, the flags agree
  // with each other (--gpu-memory-utilization needs a GPU device;
  // --lm-head-dtype fp8 on a GPU needs an FP8 checkpoint).
  Status check() const;
  LoadOptions load_options() const;
  // Applies --threads, then loads the weights.
  Result<std::unique_ptr<ModelWeights>> load() const;
  Result<std::unique_ptr<Backend>> make_backend() const;
  // The backend first (a missing device fails before a long load), then the
  // weights, prepared on it (uploaded to a GPU).
  Result<LoadedModel> load_on_backend() const;
  // The device bytes --n-cpu-moe auto keeps for the KV cache and activations.
  Result<int64_t> auto_reserve_bytes() const;
  // The model over `weights`: on `backend`, or with -tp N > 1 split over N
  // ranks (CPU: threads, each a CPU backend on its share of --threads;
  // `weights` must outlive the model). Over several nodes (--nnodes) node 0
  // gets the model of the whole group; on the other nodes it runs node 0's
  // steps until node 0 ends the job, then returns null (the command is done:
  // exit 0) or the job's failure.
  Result<std::unique_ptr<MiniMaxM2>> make_model(const ModelWeights& weights, Backend& backend) const;
  // The GPU of each rank with -tp N on --device cuda[:K]: K, K+1, ..., or
  // M2CPP_TP_DEVICES (a comma list; e.g. "0,0": two ranks on one GPU, for
  // tests); refused when the machine lacks one.
  Result<std::vector<int>> tensor_parallel_devices() const;
  // Each of this node's `local_ranks` ranks' backend (a GPU each, or a CPU
  // backend on its share of --threads) and where they run, for the log.
  struct RankBackends {
    std::function<Result<std::unique_ptr<Backend>>(int)> make;
    std::string where;
  };
  Result<RankBackends> rank_backends(int local_ranks) const;
  // make_model over several nodes, after the rendezvous.
  Result<std::unique_ptr<MiniMaxM2>> make_node_model(const ModelWeights& weights, const ParallelConfig& p,
                                                     const NodeConfig& node, const RankBackends& ranks) const;
#ifdef M2CPP_WITH_CUDA
  // --cuda-options with the flags that set CudaOptions (--batch-invariant, --cpu-moe-max-tokens).
  Result<cuda::CudaOptions> parsed_cuda_options() const;
#endif
  // Sizes the global thread pool from --threads (before any backend exists).
  void apply_threads() const;
  // KV-cache bytes: `explicit_bytes` (--kv-cache-memory) when > 0; else,
  // with --gpu-memory-utilization, what its budget leaves after the weights
  // and the activations of a step of `max_tokens` tokens and `max_rows`
  // logit rows (`model` a GPU group: a rank's, from every rank's GPU and
  // shard, engine/memory_budget.h); else `fallback`.
  Result<int64_t> kv_cache_bytes(const LoadedModel& m, MiniMaxM2& model, int64_t explicit_bytes, int64_t fallback,
                                 int64_t max_tokens, int64_t max_rows) const;
};

// "cuda" -> 0, "cuda:N" -> N, anything else -> -1.
int parse_cuda_device(const std::string& device);

// The bundled demo model used when no -m is given: $M2CPP_MODEL, else
// models/m2-demo next to the binary's build directory or under the current
// directory; empty if none exists.
std::string default_model_dir();

// A KV-cache dtype name (f32/float32, bf16/bfloat16/auto, fp8/fp8_e4m3),
// the same for every command.
Result<DType> parse_kv_dtype(const std::string& name);

// "1,2,3" -> ids.
Result<std::vector<int32_t>> parse_id_list(const std::string& text);

// End-of-sequence ids of a model directory: generation_config.json's
// eos_token_id (int or list), else config.json's; empty if neither says.
std::vector<int32_t> model_eos_ids(const std::string& model_dir, const ModelConfig& config);

}  // namespace m2::cli
