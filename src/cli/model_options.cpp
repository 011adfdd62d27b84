#include "cli/model_options.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <limits>
#include <vector>

#include <fmt/ranges.h>

#include "cli/flag_checks.h"
#include "engine/memory_budget.h"
#include "model/expert_placement.h"
#include "model/tensor_parallel.h"
#include "engine/scheduler.h"
#include "util/json.h"
#include "util/log.h"
#include "util/thread_pool.h"
#include "util/version.h"
#ifdef M2CPP_WITH_CUDA
#include "backend/cuda/cuda_backend.h"
#endif

namespace m2::cli {

void ModelOptions::add_to(CLI::App* app, bool model_required) {
  auto* m = app->add_option("-m,--model", model, "Model directory (config.json + safetensors), or a config.json "
                                                "file with --load-format dummy");
  if (model_required) m->required();
  app->add_option("--load-format", load_format, "auto | safetensors | dummy (random weights in the real dtypes)")
      ->check(CLI::IsMember({"auto", "safetensors", "dummy"}));
  app->add_option("--num-layers", num_layers, "Use only the first N decoder layers")
      ->check(int_range(1, std::numeric_limits<int>::max()));
  app->add_option("--dummy-seed", seed, "Seed of --load-format dummy weights");
  app->add_option("--threads", threads,
                  "CPU threads (default: all hardware threads; with --device cuda, the threads that compute experts "
                  "kept in host memory, default all but one)")
      ->check(int_range(1, 4096));
#ifdef M2CPP_WITH_CUDA
  app->add_option("--device", device, "cpu, or cuda[:N] (GPU N, default 0)")
      ->check([](const std::string& d) { return d == "cpu" || parse_cuda_device(d) >= 0 ? "" : "expected cpu or cuda[:N]"; });
  app->add_option("--cuda-options", cuda_options,
                  "The CUDA backend's switches, key=value[,...]: fp8_gemm=cublaslt|own|off, moe_cutlass=on|off, "
                  "attn_prefill=flashinfer|mma, tc_attention, graphs, sync, profile, pdl, batch_invariant=on|off (also "
                  "M2CPP_CUDA_OPTIONS; this flag wins)");
#else
  app->add_option("--device", device, "cpu")->check(CLI::IsMember({"cpu"}));
#endif
  app->add_flag("--batch-invariant", batch_invariant,
                "A sequence's logits bit-identical whatever else is in its batch, its chunking and its place in the "
                "batch (for RL rollouts and reproducible agents): on the GPU one kernel per op at every step size, "
                "W8A8 FP8 throughout, slower (docs/perf.md); the CPU backend always is");
  app->add_flag("--cpu-moe", cpu_moe, "Keep every layer's routed experts in host memory (--device cuda; the CPU "
                                     "computes small steps, larger ones stream them to the GPU)");
  app->add_option("--n-cpu-moe", n_cpu_moe,
                  "Keep the routed experts of the first N layers in host memory, or 'auto': as many as the GPU "
                  "cannot hold beside the rest of the weights, the activations and a KV cache of --max-model-len x "
                  "--max-num-seqs within --gpu-memory-utilization (--device cuda)");
  app->add_option("--cpu-moe-max-tokens", cpu_moe_max_tokens,
                  "Steps of up to this many tokens compute host-resident experts on the CPU; larger ones copy them "
                  "to the GPU layer by layer")
      ->check(int_range(1, 65536));
  app->add_option("--gpu-memory-utilization", gpu_memory_utilization,
                  "Fraction (0, 1] of the GPU's memory for weights + activations + KV cache; sizes the KV cache "
                  "when --kv-cache-memory is not given (--device cuda)")
      ->check(positive_number(1));
  app->add_option("--lm-head-dtype", lm_head_dtype,
                  "bf16 (default: lm_head as stored) or fp8 (quantised once loaded to FP8 e4m3 with 128x128 block "
                  "scales: half the head's bytes per step; its logit error in docs/status.md)")
      ->check(CLI::IsMember({"bf16", "fp8"}));
}

void ModelOptions::add_parallel_to(CLI::App* app) {
  app->add_option("--tensor-parallel-size", tensor_parallel_size,
                  "(also -tp) Ranks the model is split over: attention heads, expert columns (CPU backend: ranks as "
                  "threads)")
      ->check(int_range(1, 1024));
  app->add_flag("--enable-expert-parallel", enable_expert_parallel,
                "Split the experts whole over the ranks instead of each expert's columns");
  nodes.add_to(app);
}

Status ModelOptions::check() const {
  std::error_code ec;
  if (!std::filesystem::exists(model, ec)) return errorf("-m {}: no such file or directory", model);
  if (gpu_memory_utilization != 0 && device == "cpu") return errorf("--gpu-memory-utilization applies to --device cuda");
  if ((cpu_moe || !n_cpu_moe.empty()) && device == "cpu")
    return errorf("--cpu-moe and --n-cpu-moe place experts beside a GPU (--device cuda); on the CPU backend every "
                  "expert is in host memory anyway");
  if (cpu_moe && !n_cpu_moe.empty()) return errorf("--cpu-moe and --n-cpu-moe: give one of them");
  if (batch_invariant && (cpu_moe || !n_cpu_moe.empty()))
    return errorf("--batch-invariant with --cpu-moe or --n-cpu-moe is not supported: a host layer's experts run on "
                  "the CPU up to --cpu-moe-max-tokens tokens a step and on the GPU above, with other numerics");
  if (!n_cpu_moe.empty()) M2_RETURN_IF_ERROR(parse_n_cpu_moe(n_cpu_moe).status());
  M2_ASSIGN_OR_RETURN(const NodeConfig node, nodes.resolve(tensor_parallel_size));
  if (tensor_parallel_size > 1) {  // before a long load: the split is decided by config.json alone
    if (device != "cpu") {
      if (cpu_moe || !n_cpu_moe.empty())
        return errorf("--cpu-moe and --n-cpu-moe with --tensor-parallel-size {}: not supported (with several GPUs "
                      "the experts are split over them instead)",
                      tensor_parallel_size);
      if (gpu_memory_utilization != 0 && node.nnodes > 1)
        return errorf("--gpu-memory-utilization with --nnodes {} on the GPU is not supported yet: give the KV "
                      "cache's bytes per GPU (--kv-cache-memory)",
                      node.nnodes);
      M2_RETURN_IF_ERROR(tensor_parallel_devices().status());
    }
    M2_ASSIGN_OR_RETURN(const ModelConfig config, load_config_from(model));
    ParallelConfig p;
    p.tensor_parallel_size = tensor_parallel_size, p.expert_parallel = enable_expert_parallel;
    M2_RETURN_IF_ERROR(check_parallel(config, p));
    // The head is split by vocabulary when tp divides it (model/weight_shard.h):
    // an FP8 head's rows per rank must then fall on its scale blocks
    // (lm_head_quant.h uses the checkpoint's block shape, else 128 x 128).
    const int block = config.fp8 ? config.fp8->block_rows : 128;
    if (lm_head_dtype == "fp8" && config.vocab_size % tensor_parallel_size == 0 &&
        (config.vocab_size / tensor_parallel_size) % block != 0)
      return errorf("--lm-head-dtype fp8 with --tensor-parallel-size {}: each rank's {} vocabulary rows of the head "
                    "are not a multiple of its {}-row FP8 scale blocks (use the BF16 head, or a size whose share "
                    "is)",
                    tensor_parallel_size, config.vocab_size / tensor_parallel_size, block);
  }
  if (lm_head_dtype == "fp8" && device != "cpu") {
    // The CUDA backend sizes its FP8 activation scratch (for the FP8 GEMM's
    // quantised x) from the checkpoint's dtype: a BF16 checkpoint has none
    // for an FP8 head to use.
    M2_ASSIGN_OR_RETURN(const ModelConfig config, load_config_from(model));
    if (!config.fp8)
      return errorf("--lm-head-dtype fp8 on --device {} needs an FP8 checkpoint (its step scratch holds the FP8 "
                    "activations the head's GEMM reads); on the CPU any checkpoint can use it",
                    device);
  }
  return Status();
}

Result<std::vector<int>> ModelOptions::tensor_parallel_devices() const {
  // This node's ranks (all of them on one node).
  M2_ASSIGN_OR_RETURN(const NodeConfig node, nodes.resolve(tensor_parallel_size));
  const int ranks = tensor_parallel_size / node.nnodes;
  const std::string what = node.nnodes > 1 ? fmt::format("this node's {} ranks of --tensor-parallel-size {}", ranks,
                                                          tensor_parallel_size)
                                           : fmt::format("--tensor-parallel-size {}", tensor_parallel_size);
  std::vector<int> devices;
  if (const char* env = std::getenv("M2CPP_TP_DEVICES"); env && *env) {
    const std::string list = env;
    for (size_t b = 0; b <= list.size();) {
      const size_t e = std::min(list.find(',', b), list.size());
      const std::string item = list.substr(b, e - b);
      b = e + 1;
      const int d = parse_cuda_device("cuda:" + item);
      if (d < 0) return errorf("M2CPP_TP_DEVICES={}: '{}' is not a GPU number", env, item);
      devices.push_back(d);
    }
    if (static_cast<int>(devices.size()) != ranks)
      return errorf("M2CPP_TP_DEVICES={}: {} GPU(s) for {}", env, devices.size(), what);
  } else {
    const int base = parse_cuda_device(device);
    for (int r = 0; r < ranks; ++r) devices.push_back(base + r);
  }
#ifdef M2CPP_WITH_CUDA
  const int have = cuda_device_count();
#else
  const int have = 0;
#endif
  for (size_t r = 0; r < devices.size(); ++r)
    if (devices[r] >= have)
      return errorf("{} on --device {}: rank {} needs GPU {} and this machine has {} (one GPU per rank from "
                    "--device's; M2CPP_TP_DEVICES lists them, e.g. 0,0 for a test on one GPU)",
                    what, device, r, devices[r], have);
  return devices;
}

#ifdef M2CPP_WITH_CUDA
namespace {
// Rank r's backend: a CUDA backend on devices[r] (local rank r of this node).
std::function<Result<std::unique_ptr<Backend>>(int)> cuda_rank_backends(std::vector<int> devices,
                                                                        cuda::CudaOptions options) {
  return [devices = std::move(devices), options](int r) -> Result<std::unique_ptr<Backend>> {
    std::unique_ptr<Backend> b = make_cuda_backend(devices[r], options);
    if (!b) return errorf("rank {}: the CUDA backend could not start on GPU {} (see the message above)", r, devices[r]);
    return b;
  };
}
}  // namespace
#endif

Result<ModelOptions::RankBackends> ModelOptions::rank_backends(int local_ranks) const {
  RankBackends r;
#ifdef M2CPP_WITH_CUDA
  if (device != "cpu") {  // a GPU per local rank
    M2_ASSIGN_OR_RETURN(const std::vector<int> devices, tensor_parallel_devices());
    M2_ASSIGN_OR_RETURN(const cuda::CudaOptions options, parsed_cuda_options());
    r.make = cuda_rank_backends(devices, options);
    r.where = fmt::format("on GPUs {}", fmt::join(devices, ","));
    return r;
  }
#endif
  // The global pool serves one caller at a time: each rank gets a pool of its share.
  const int total = threads > 0 ? threads : ThreadPool::global().size();
  const int per_rank = std::max(1, total / local_ranks);
  r.make = [per_rank](int) -> Result<std::unique_ptr<Backend>> { return make_cpu_backend(per_rank); };
  r.where = fmt::format("on the CPU, {} thread(s) each", per_rank);
  return r;
}

Result<std::unique_ptr<MiniMaxM2>> ModelOptions::make_model(const ModelWeights& weights, Backend& backend) const {
  M2_ASSIGN_OR_RETURN(const NodeConfig node, nodes.resolve(tensor_parallel_size));
  if (tensor_parallel_size <= 1 && node.nnodes <= 1) return std::make_unique<MiniMaxM2>(weights, backend);
  M2_RETURN_IF_ERROR(check());
  ParallelConfig p;
  p.tensor_parallel_size = tensor_parallel_size, p.expert_parallel = enable_expert_parallel;
  M2_ASSIGN_OR_RETURN(const RankBackends ranks, rank_backends(tensor_parallel_size / node.nnodes));
  const char* split = enable_expert_parallel ? " (experts split whole)" : "";
  if (node.nnodes > 1) return make_node_model(weights, p, node, ranks);
  // GPU ranks meet in the peer-to-peer collectives, CPU ranks in the in-process communicator.
  const bool gpu = device != "cpu";
  log_info("tensor parallel: {} ranks{} {}{}", tensor_parallel_size, split, ranks.where,
           gpu ? ", peer-to-peer collectives" : "");
#ifdef M2CPP_WITH_CUDA
  if (gpu) return MiniMaxM2::tensor_parallel(weights, p, ranks.make, make_cuda_peer_communicators);
#endif
  return MiniMaxM2::tensor_parallel(weights, p, ranks.make);
}

Result<std::unique_ptr<MiniMaxM2>> ModelOptions::make_node_model(const ModelWeights& weights, const ParallelConfig& p,
                                                                 const NodeConfig& node,
                                                                 const RankBackends& ranks) const {
  const int local = tensor_parallel_size / node.nnodes;
  NodeIdentity id;
  id.version = kM2cppVersion;
  id.tensor_parallel_size = tensor_parallel_size, id.expert_parallel = enable_expert_parallel;
  id.model = node_model_identity(weights, load_format, seed, lm_head_dtype);
  M2_ASSIGN_OR_RETURN(std::unique_ptr<NodeGroup> group, NodeGroup::rendezvous(node, id));
  log_info("tensor parallel: node {} of {} holds ranks {}..{} of {}{} {}{}", node.node_rank, node.nnodes,
           node.node_rank * local, node.node_rank * local + local - 1, tensor_parallel_size,
           enable_expert_parallel ? " (experts split whole)" : "", ranks.where,
           device != "cpu" ? ", collectives staged through the host (no NCCL yet)" : "");
  M2_ASSIGN_OR_RETURN(std::unique_ptr<MiniMaxM2> model,
                      MiniMaxM2::tensor_parallel(weights, p, ranks.make, {}, std::shared_ptr<NodeGroup>(std::move(group))));
  if (node.node_rank == 0) return model;
  log_info("node {}: following node 0's steps", node.node_rank);
  M2_RETURN_IF_ERROR(model->follow_node_zero());
  log_info("node {}: node 0 ended the job", node.node_rank);
  return std::unique_ptr<MiniMaxM2>();
}

LoadOptions ModelOptions::load_options() const {
  LoadOptions o;
  o.format = load_format == "dummy"         ? LoadOptions::Format::kDummy
             : load_format == "safetensors" ? LoadOptions::Format::kSafetensors
                                            : LoadOptions::Format::kAuto;
  o.num_layers = num_layers;
  o.seed = seed;
  // A GPU generates dummy FP8 weights itself (seconds, not minutes of host filling and uploading).
  o.dummy_fp8_on_device = parse_cuda_device(device) >= 0;
  o.fp8_lm_head = lm_head_dtype == "fp8";
  return o;
}

Result<std::unique_ptr<ModelWeights>> ModelOptions::load() const {
  apply_threads();
  return load_model(model, load_options());
}

void ModelOptions::apply_threads() const {
  if (threads > 0) ThreadPool::set_global_threads(threads);
}

int parse_cuda_device(const std::string& device) {
  if (device == "cuda") return 0;
  if (device.rfind("cuda:", 0) != 0 || device.size() == 5) return -1;
  int n = 0;
  for (char c : device.substr(5)) {
    if (c < '0' || c > '9' || n > 1000) return -1;
    n = n * 10 + (c - '0');
  }
  return n;
}

Result<std::unique_ptr<Backend>> ModelOptions::make_backend() const {
  apply_threads();  // before the backend takes the global pool
  if (device == "cpu") return make_cpu_backend();
#ifdef M2CPP_WITH_CUDA
  if (const int gpu = parse_cuda_device(device); gpu >= 0) {
    M2_ASSIGN_OR_RETURN(cuda::CudaOptions options, parsed_cuda_options());
    if (threads > 0) options.cpu_moe_threads = threads;  // as llama.cpp's -t with offloaded experts
    if (cpu_moe) options.cpu_moe_layers = cuda::CudaOptions::kCpuMoeAll;
    if (!n_cpu_moe.empty()) {
      M2_ASSIGN_OR_RETURN(const ExpertPlacementRequest r, parse_n_cpu_moe(n_cpu_moe));
      options.cpu_moe_layers = r.mode == ExpertPlacementRequest::Mode::kAuto ? cuda::CudaOptions::kCpuMoeAuto : r.count;
      if (r.mode == ExpertPlacementRequest::Mode::kAuto) {
        M2_ASSIGN_OR_RETURN(options.cpu_moe_reserve_bytes, auto_reserve_bytes());
        options.cpu_moe_memory_fraction = gpu_memory_utilization != 0 ? gpu_memory_utilization : 0.9;
      }
    }
    std::unique_ptr<Backend> b = make_cuda_backend(gpu, options);
    if (!b) return errorf("--device {}: the CUDA backend could not start (see the message above)", device);
    return b;
  }
#endif
  return errorf("--device {}: not available in this build", device);
}

#ifdef M2CPP_WITH_CUDA
Result<cuda::CudaOptions> ModelOptions::parsed_cuda_options() const {
  M2_ASSIGN_OR_RETURN(cuda::CudaOptions options, cuda::CudaOptions::parse(cuda_options));
  options.cpu_moe_max_tokens = cpu_moe_max_tokens;
  if (batch_invariant) options.batch_invariant = true;
  return options;
}
#endif

Result<int64_t> ModelOptions::auto_reserve_bytes() const {
  M2_ASSIGN_OR_RETURN(ModelConfig c, load_config_from(model));
  if (num_layers > 0 && num_layers < c.num_hidden_layers) c.num_hidden_layers = num_layers;
  M2_ASSIGN_OR_RETURN(const DType kv_dtype, parse_kv_dtype(auto_kv_dtype));
  KvCacheShape kv_shape;  // the cache's own arithmetic (FP8 scales included), in blocks of 16
  kv_shape.num_layers = c.num_hidden_layers, kv_shape.num_kv_heads = c.num_key_value_heads;
  kv_shape.head_dim = c.head_dim, kv_shape.dtype = kv_dtype;
  kv_shape.num_blocks = (auto_kv_tokens + kv_shape.block_size - 1) / kv_shape.block_size;
  const int64_t kv = static_cast<int64_t>(KvCache::storage_bytes(kv_shape));
  SchedulerConfig sc;
  sc.max_num_seqs = static_cast<int>(auto_logit_rows), sc.max_num_batched_tokens = auto_step_tokens;
  const int64_t act = activation_reserve_bytes(c, auto_step_tokens, sc.max_logit_rows());
  log_info("--n-cpu-moe auto: keeping {:.2f} GiB of the GPU for a KV cache of {} tokens ({}) and {:.2f} GiB for "
           "activations",
           kv / 1073741824.0, auto_kv_tokens, dtype_name(kv_dtype), act / 1073741824.0);
  return kv + act;
}

Result<LoadedModel> ModelOptions::load_on_backend() const {
  LoadedModel m;
  M2_RETURN_IF_ERROR(check());  // before a long load
  M2_ASSIGN_OR_RETURN(m.backend, make_backend());
  M2_ASSIGN_OR_RETURN(m.weights, load());
  // A GPU group's ranks prepare their own shards (make_model).
  if (tensor_parallel_size > 1 && device != "cpu") return m;
  const size_t free_before = m.backend->memory_info().free_bytes;
  M2_RETURN_IF_ERROR(m.backend->prepare_weights(*m.weights));
  if (device != "cpu") {
    const size_t free_after = m.backend->memory_info().free_bytes;
    m.weight_bytes = free_before > free_after ? static_cast<int64_t>(free_before - free_after) : 0;
    if (gpu_memory_utilization != 0) {  // the weights alone must fit the budget
      const MemoryInfo mi = m.backend->memory_info();
      M2_RETURN_IF_ERROR(
          kv_cache_budget(gpu_memory_utilization, static_cast<int64_t>(mi.total_bytes), m.weight_bytes, 0).status());
    }
  }
  return m;
}

Result<int64_t> ModelOptions::kv_cache_bytes(const LoadedModel& m, MiniMaxM2& model, int64_t explicit_bytes,
                                             int64_t fallback, int64_t max_tokens, int64_t max_rows) const {
  if (explicit_bytes > 0) return explicit_bytes;
  if (gpu_memory_utilization == 0) return fallback;
  SchedulerConfig sc;  // its logit rows: max_rows decodes plus the prompt-logprobs rows
  sc.max_num_seqs = static_cast<int>(max_rows), sc.max_num_batched_tokens = max_tokens;
  // (The whole model's step: an upper bound of a rank's, whose heads and expert columns are a share.)
  const int64_t reserve = activation_reserve_bytes(m.weights->config, max_tokens, sc.max_logit_rows());
  if (TensorParallelGroup* group = model.group(); group && device != "cpu") {
    // Each rank's weights are its own shard's, on the GPU it shares with
    // whichever ranks M2CPP_TP_DEVICES puts there.
    M2_ASSIGN_OR_RETURN(const std::vector<int> devices, tensor_parallel_devices());
    std::vector<RankMemory> ranks;
    for (int r = 0; r < group->size(); ++r) {
      Backend& b = group->backend(r);
      ranks.push_back({devices[r], static_cast<int64_t>(b.memory_info().total_bytes),
                       static_cast<int64_t>(b.weight_bytes())});
      log_info("--gpu-memory-utilization {}: rank {} on GPU {}: weights {:.2f} GiB of {:.2f} GiB", gpu_memory_utilization,
               r, devices[r], ranks.back().weight_bytes / 1073741824.0, ranks.back().total_bytes / 1073741824.0);
    }
    M2_ASSIGN_OR_RETURN(int64_t kv, kv_cache_budget_per_rank(gpu_memory_utilization, ranks, reserve));
    log_info("--gpu-memory-utilization {}: activation reserve {:.2f} GiB a rank, KV cache {:.2f} GiB a rank",
             gpu_memory_utilization, reserve / 1073741824.0, kv / 1073741824.0);
    return kv;
  }
  const int64_t total = static_cast<int64_t>(m.backend->memory_info().total_bytes);
  M2_ASSIGN_OR_RETURN(int64_t kv, kv_cache_budget(gpu_memory_utilization, total, m.weight_bytes, reserve));
  log_info("--gpu-memory-utilization {}: {:.2f} GiB of {:.2f} GiB: weights {:.2f}, activation reserve {:.2f}, "
           "KV cache {:.2f} GiB",
           gpu_memory_utilization, gpu_memory_utilization * total / 1073741824.0, total / 1073741824.0,
           m.weight_bytes / 1073741824.0, reserve / 1073741824.0, kv / 1073741824.0);
  return kv;
}

Result<DType> parse_kv_dtype(const std::string& name) {
  if (name == "f32" || name == "float32") return DType::kF32;
  if (name == "bf16" || name == "bfloat16" || name == "auto") return DType::kBF16;
  if (name == "fp8" || name == "fp8_e4m3") return DType::kF8E4M3;
  return errorf("KV cache dtype '{}': expected f32, bf16 or fp8", name);
}

std::string default_model_dir() {
  namespace fs = std::filesystem;
  if (const char* env = std::getenv("M2CPP_MODEL"); env && *env) return env;
  std::error_code ec;
  std::vector<fs::path> candidates;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    candidates.push_back(exe.parent_path() / ".." / "models" / "m2-demo");        // build/m2cpp
    candidates.push_back(exe.parent_path() / ".." / "share" / "m2cpp" / "m2-demo");  // installed
  }
  candidates.push_back(fs::current_path(ec) / "models" / "m2-demo");
  for (const auto& c : candidates) {
    if (fs::exists(c / "config.json", ec)) return fs::weakly_canonical(c, ec).string();
  }
  return "";
}

Result<std::vector<int32_t>> parse_id_list(const std::string& text) {
  std::vector<int32_t> ids;
  size_t i = 0;
  while (i < text.size()) {
    size_t j = text.find(',', i);
    if (j == std::string::npos) j = text.size();
    std::string item = text.substr(i, j - i);
    item.erase(0, item.find_first_not_of(" \t"));
    item.erase(item.find_last_not_of(" \t") + 1);
    if (item.empty()) return errorf("--ids: empty item at character {}", i);
    size_t used = 0;
    long long v = 0;
    try {
      v = std::stoll(item, &used);
    } catch (...) {
      used = 0;
    }
    if (used != item.size() || v < 0 || v > INT32_MAX) return errorf("--ids: '{}' is not a token id", item);
    ids.push_back(static_cast<int32_t>(v));
    i = j + 1;
  }
  if (ids.empty()) return errorf("--ids: no token ids given");
  return ids;
}

std::vector<int32_t> model_eos_ids(const std::string& model_dir, const ModelConfig& config) {
  std::vector<int32_t> ids;
  const auto path = std::filesystem::path(model_dir) / "generation_config.json";
  std::error_code ec;
  if (std::filesystem::is_directory(model_dir, ec) && std::filesystem::exists(path, ec)) {
    auto j = read_json_file(path.string());
    if (j.ok()) {
      auto it = j->find("eos_token_id");
      if (it != j->end() && it->is_number_integer()) ids.push_back(it->get<int32_t>());
      if (it != j->end() && it->is_array())
        for (const auto& v : *it)
          if (v.is_number_integer()) ids.push_back(v.get<int32_t>());
    }
  }
  if (ids.empty() && config.eos_token_id) ids.push_back(*config.eos_token_id);
  return ids;
}

}  // namespace m2::cli
