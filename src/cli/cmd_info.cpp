// m2cpp info: what a model is, what it costs (parameters, bytes, KV/token).
#include <filesystem>
#include <map>
#include <thread>

#include "cli/commands.h"
#include "cli/model_options.h"
#include "engine/memory_budget.h"
#include "engine/scheduler.h"
#include "model/kv_cache.h"
#include "model/expert_placement.h"
#include "model/weight_shard.h"
#include "model/weights.h"
#include "util/cpu_features.h"
#include "util/json.h"

#ifdef M2CPP_WITH_CUDA
#include "backend/cuda/cuda_backend.h"
#endif

namespace m2::cli {
namespace {

struct Counts {
  uint64_t weights = 0;        // elements of weight tensors
  uint64_t scales = 0;         // elements of FP8 scale tensors
  uint64_t active = 0;         // elements read per token (one embedding row, k experts)
  std::map<std::string, uint64_t> bytes_by_dtype;
  uint64_t rank_bytes = 0;  // bytes rank 0 of -tp holds (every rank holds as many)
};

Counts count(const ModelConfig& c, const std::vector<TensorSpec>& specs, const Checkpoint* ck,
             const ParallelConfig& parallel) {
  Counts n;
  const std::string expert_tag = "block_sparse_moe.experts.";
  for (const TensorSpec& s : specs) {
    DType dt = s.dtype;
    uint64_t elems = static_cast<uint64_t>(s.shape.numel());
    if (ck) {
      const SafetensorsEntry* e = ck->entry(s.name);
      if (!e) continue;  // FP8 scales of a checkpoint stored unquantized
      dt = e->dtype;
    }
    n.bytes_by_dtype[std::string(dtype_name(dt))] += elems * dtype_size(dt);
    const TensorShare share = tensor_share(c, parallel, 0, s.name);
    const uint64_t mine = elems * dtype_size(dt) * share.num / share.den;
    n.rank_bytes += mine;
    (s.kind == TensorSpec::Kind::kScale ? n.scales : n.weights) += elems;
    // Active: everything but the embedding table (one row) and the experts
    // (top-k of E per layer).
    if (s.kind == TensorSpec::Kind::kEmbedding) {
      n.active += s.shape[1];
    } else if (s.name.find(expert_tag) != std::string::npos) {
      n.active += elems * c.num_experts_per_tok / c.num_local_experts;
    } else {
      n.active += elems;
    }
  }
  return n;
}

#ifdef M2CPP_WITH_CUDA
// "decode:1,decode:64,prefill:8192" -> steps (decode: that many sequences of
// one row at `context`; prefill: one sequence of that many rows, context = rows).
Result<std::vector<cuda::StepShape>> parse_steps(const std::string& spec, int64_t context, DType kv) {
  std::vector<cuda::StepShape> steps;
  size_t at = 0;
  while (at <= spec.size()) {
    const size_t comma = std::min(spec.find(',', at), spec.size());
    const std::string item = spec.substr(at, comma - at);
    at = comma + 1;
    const size_t colon = item.find(':');
    int64_t n = 0;
    if (colon != std::string::npos) {
      const std::string num = item.substr(colon + 1);
      if (num.empty() || num.size() > 9 || num.find_first_not_of("0123456789") != std::string::npos)
        return errorf("--plan-steps: '{}': the count is not a number", item);
      n = std::stoll(num);
    }
    const std::string kind = item.substr(0, colon);
    if (n < 1 || (kind != "decode" && kind != "prefill"))
      return errorf("--plan-steps: '{}' is not decode:N or prefill:N (N >= 1)", item);
    steps.push_back(kind == "decode" ? cuda::StepShape{n, 1, context, kv} : cuda::StepShape{1, n, n, kv});
  }
  return steps;
}
#endif

int run_plan(const ModelOptions& mo, const std::string& steps, int64_t context, const std::string& kv) {
#ifdef M2CPP_WITH_CUDA
  auto cfg = load_config_from(mo.model);
  if (!cfg.ok()) return fmt::print(stderr, "error: {}\n", cfg.status().message()), 1;
  ModelConfig c = *cfg;
  if (mo.num_layers > 0) c.num_hidden_layers = std::min(c.num_hidden_layers, mo.num_layers);
  auto options = cuda::CudaOptions::parse(mo.cuda_options);
  if (!options.ok()) return fmt::print(stderr, "error: {}\n", options.status().message()), 1;
  const DType kv_dtype = kv == "bf16" ? DType::kBF16 : DType::kF8E4M3;
  auto parsed = parse_steps(steps, context, kv_dtype);
  if (!parsed.ok()) return fmt::print(stderr, "error: {}\n", parsed.status().message()), 1;
  // The scratch reserved for serve's default limits and a 32 GiB KV cache.
  SchedulerConfig sc;
  sc.max_num_seqs = 256, sc.max_num_batched_tokens = 2048;
  StepLimits limits;
  limits.max_tokens = sc.max_num_batched_tokens, limits.max_seqs = sc.max_num_seqs;
  limits.max_logit_rows = sc.max_logit_rows(), limits.max_context = c.max_position_embeddings;
  KvCacheShape& kvs = limits.cache;
  kvs.num_layers = c.num_hidden_layers, kvs.num_kv_heads = c.num_key_value_heads, kvs.head_dim = c.head_dim;
  kvs.block_size = 16, kvs.dtype = kv_dtype, kvs.num_blocks = 1;
  kvs.num_blocks = (int64_t{32} << 30) / static_cast<int64_t>(KvCache::storage_bytes(kvs));
  fmt::print("{}", cuda_describe_plans(c, *parsed, *options, limits));
  return 0;
#else
  return fmt::print(stderr, "error: --plan: this build has no CUDA backend\n"), 1;
#endif
}

constexpr int64_t kH200 = 150'020'816'896;  // cudaMemGetInfo's total on an H200 (139.7 GiB)
constexpr int64_t kContext = 1ll << 29;     // the CUDA context and libraries

// What one GPU (an H200) holds of this configuration at serve's defaults:
// a rank's weights, the activation reserve of a step of
// --max-num-batched-tokens' default, the CUDA context, and the KV cache in
// what --gpu-memory-utilization (default 0.9) leaves, as tokens of a rank's
// cache in BF16 and FP8 (scales included); or the GiB it lacks.
struct GpuFit {
  double utilization = 0.9;
  int64_t weights = 0, activations = 0, kv = 0, kv_tokens_bf16 = 0, kv_tokens_fp8 = 0;
  int64_t short_by = 0;  // > 0: does not fit, by this many bytes
};

GpuFit fit_on_h200(const ModelConfig& c, int kv_heads, int64_t weight_bytes, double utilization) {
  GpuFit f;
  f.utilization = utilization != 0 ? utilization : 0.9;
  f.weights = weight_bytes;
  SchedulerConfig sc;
  f.activations = activation_reserve_bytes(c, sc.max_num_batched_tokens, sc.max_logit_rows());
  const int64_t left = static_cast<int64_t>(f.utilization * kH200) - kContext - f.weights - f.activations;
  if (left <= 0) {
    f.short_by = 1 - left;
    return f;
  }
  f.kv = left;
  auto per_block = [&](DType dtype) {
    KvCacheShape s;
    s.num_layers = c.num_hidden_layers, s.num_kv_heads = kv_heads, s.head_dim = c.head_dim, s.dtype = dtype;
    s.num_blocks = 1;
    return static_cast<int64_t>(KvCache::storage_bytes(s));
  };
  f.kv_tokens_bf16 = left / per_block(DType::kBF16) * 16;
  f.kv_tokens_fp8 = left / per_block(DType::kF8E4M3) * 16;
  return f;
}

// The expert placement of --cpu-moe / --n-cpu-moe (auto: within
// --gpu-memory-utilization of an H200, less the KV cache and activations
// that --n-cpu-moe auto keeps by default).
Result<std::string> placement(const ModelOptions& mo, const ModelConfig& c) {
  ExpertPlacementRequest r;
  r.mode = ExpertPlacementRequest::Mode::kAll;
  if (!mo.n_cpu_moe.empty()) {
    M2_ASSIGN_OR_RETURN(r, parse_n_cpu_moe(mo.n_cpu_moe));
  }
  std::string budget;
  if (r.mode == ExpertPlacementRequest::Mode::kAuto) {
    const double util = mo.gpu_memory_utilization != 0 ? mo.gpu_memory_utilization : 0.9;
    M2_ASSIGN_OR_RETURN(const int64_t reserve, mo.auto_reserve_bytes());
    r.device_budget = static_cast<int64_t>(util * kH200) - kContext - reserve;
    budget = fmt::format(" [auto on an H200: {:.2f} GiB for weights = {} x 139.7 GiB - 0.5 (CUDA) - {:.2f} (KV cache "
                         "of {} tokens and activations)]",
                         r.device_budget / 1073741824.0, util, reserve / 1073741824.0, mo.auto_kv_tokens);
  }
  M2_ASSIGN_OR_RETURN(const ExpertPlacement p, plan_expert_placement(c, r));
  const int threads = host_expert_threads(mo.threads, static_cast<int>(std::thread::hardware_concurrency()));
  return p.describe() + budget +
         fmt::format("; host experts computed by {} CPU thread{} ({})", threads, threads == 1 ? "" : "s",
                     mo.threads > 0 ? "--threads" : "all hardware threads but one; --threads sets it");
}

int run_info(const ModelOptions& mo, bool as_json) {
  LoadOptions lo = mo.load_options();
  auto cfg = load_config_from(mo.model);
  if (!cfg.ok()) return fmt::print(stderr, "error: {}\n", cfg.status().message()), 1;
  ModelConfig c = *cfg;
  if (mo.num_layers > 0) c.num_hidden_layers = std::min(c.num_hidden_layers, mo.num_layers);
  std::error_code ec;
  const bool real = lo.format != LoadOptions::Format::kDummy && std::filesystem::is_directory(mo.model, ec);
  std::unique_ptr<ModelWeights> w;
  if (real) {  // validate the checkpoint and count what it really stores
    auto loaded = mo.load();
    if (!loaded.ok()) return fmt::print(stderr, "error: {}\n", loaded.status().message()), 1;
    w = std::move(loaded.value());
  }
  ParallelConfig parallel;
  parallel.tensor_parallel_size = mo.tensor_parallel_size, parallel.expert_parallel = mo.enable_expert_parallel;
  if (Status s = check_parallel(c, parallel); !s.ok()) return fmt::print(stderr, "error: {}\n", s.message()), 1;
  const Counts n = count(c, expected_tensors(c), w ? w->checkpoint.get() : nullptr, parallel);
  const uint64_t kv_bf16 = 2ull * c.num_hidden_layers * c.kv_dim() * 2;
  const RankLayout rank0 = rank_layout(c, parallel, 0);
  const uint64_t kv_rank_bf16 = 2ull * c.num_hidden_layers * rank0.num_kv_heads * c.head_dim * 2;
  const uint64_t total = n.weights + n.scales;
  uint64_t all_bytes = 0;
  for (const auto& [name, b] : n.bytes_by_dtype) all_bytes += b;
  const GpuFit fit = fit_on_h200(c, rank0.num_kv_heads,
                                 static_cast<int64_t>(parallel.tensor_parallel_size > 1 ? n.rank_bytes : all_bytes),
                                 mo.gpu_memory_utilization);

  if (as_json) {
    OrderedJson j;
    j["model"] = mo.model;
    j["source"] = real ? "safetensors" : "dummy";
    j["layers"] = c.num_hidden_layers;
    j["hidden_size"] = c.hidden_size;
    j["vocab_size"] = c.vocab_size;
    j["attention"] = {{"q_heads", c.num_attention_heads}, {"kv_heads", c.num_key_value_heads},
                      {"head_dim", c.head_dim}, {"rotary_dim", c.rotary_dim}, {"rope_theta", c.rope_theta}};
    j["moe"] = {{"experts", c.num_local_experts}, {"top_k", c.num_experts_per_tok},
                {"intermediate_size", c.intermediate_size}};
    j["fp8_block"] = c.fp8 ? Json::array({c.fp8->block_rows, c.fp8->block_cols}) : Json();
    j["parameters"] = total;
    j["weight_elements"] = n.weights;
    j["fp8_scale_elements"] = n.scales;
    j["active_parameters"] = n.active;
    j["bytes_by_dtype"] = n.bytes_by_dtype;
    j["kv_bytes_per_token_bf16"] = kv_bf16;
    j["max_position_embeddings"] = c.max_position_embeddings;
    if (parallel.tensor_parallel_size > 1)
      j["per_rank"] = {{"tensor_parallel_size", parallel.tensor_parallel_size},
                       {"expert_parallel", parallel.expert_parallel},
                       {"weight_bytes", n.rank_bytes},
                       {"kv_bytes_per_token_bf16", kv_rank_bf16}};
    j["per_gpu_h200"] = {{"gpu_memory_utilization", fit.utilization},
                         {"weight_bytes", fit.weights},
                         {"activation_bytes", fit.activations},
                         {"fits", fit.short_by == 0},
                         {"short_by_bytes", fit.short_by},
                         {"kv_cache_bytes", fit.kv},
                         {"kv_tokens_bf16", fit.kv_tokens_bf16},
                         {"kv_tokens_fp8", fit.kv_tokens_fp8}};
    fmt::print("{}\n", j.dump(2));
    return 0;
  }
  fmt::print("model            {} ({})\n", mo.model, real ? "safetensors checkpoint" : "dummy weights");
  fmt::print("architecture     MiniMaxM2ForCausalLM, {} layers, hidden {}, vocab {}, context {}\n",
             c.num_hidden_layers, c.hidden_size, c.vocab_size, c.max_position_embeddings);
  fmt::print("attention        {} q heads x {}, {} kv heads (GQA {}:1), rotary {} of {} dims, theta {:g}, "
             "qk norm {}\n", c.num_attention_heads, c.head_dim, c.num_key_value_heads, c.gqa_group(),
             c.rotary_dim, c.head_dim, c.rope_theta, c.use_qk_norm ? "full-width" : "off");
  fmt::print("moe              {} experts, top-{}, width {}, sigmoid routing{}\n", c.num_local_experts,
             c.num_experts_per_tok, c.intermediate_size, c.use_routing_bias ? " + correction bias" : "");
  fmt::print("weights          {}{}\n", dtype_name(c.dtype),
             c.fp8 ? fmt::format(" + FP8 e4m3 {}x{} block-scaled linears", c.fp8->block_rows, c.fp8->block_cols)
                   : std::string());
  fmt::print("parameters       {:.2f} B total ({} weights + {} FP8 scales)\n", total / 1e9, n.weights, n.scales);
  fmt::print("active/token     {:.2f} B ({})\n", n.active / 1e9, n.active);
  for (const auto& [name, b] : n.bytes_by_dtype)
    fmt::print("bytes {:<10} {:.3f} GiB ({} bytes)\n", name, b / double(1ull << 30), b);
  fmt::print("bytes total      {:.3f} GiB\n", all_bytes / double(1ull << 30));
  fmt::print("kv cache/token   {} bytes in BF16 ({} in FP8)\n", kv_bf16, kv_bf16 / 2);
  if (parallel.tensor_parallel_size > 1) {
    // (A CPU rank computes from views of the mapped checkpoint, column slices
    // included: only the FP8 scales of those are copied.)
    fmt::print("per rank         tp {}{}: {:.3f} GiB of weights, kv cache/token {} bytes in BF16\n",
               parallel.tensor_parallel_size, parallel.expert_parallel ? " + EP" : "", n.rank_bytes / double(1ull << 30),
               kv_rank_bf16);
  }
  constexpr double kGiB = 1073741824.0;
  if (fit.short_by == 0)
    fmt::print("per GPU (H200)   {} x {:.1f} GiB: weights {:.2f} + activations {:.2f} + CUDA 0.50 + KV cache {:.2f} GiB "
               "= {} tokens in BF16, {} in FP8\n",
               fit.utilization, kH200 / kGiB, fit.weights / kGiB, fit.activations / kGiB, fit.kv / kGiB,
               fit.kv_tokens_bf16, fit.kv_tokens_fp8);
  else
    fmt::print("per GPU (H200)   does not fit: weights {:.2f} + activations {:.2f} + CUDA 0.50 GiB exceed {} x {:.1f} GiB "
               "by {:.2f} GiB{}\n",
               fit.weights / kGiB, fit.activations / kGiB, fit.utilization, kH200 / kGiB, fit.short_by / kGiB,
               parallel.tensor_parallel_size < 8 ? " (more GPUs: -tp, or experts in host memory: --n-cpu-moe auto)" : "");
  fmt::print("cpu              {} kernels\n", isa_name(active_isa()));
  if (mo.cpu_moe || !mo.n_cpu_moe.empty()) {
    auto p = placement(mo, c);
    if (!p.ok()) return fmt::print(stderr, "error: {}\n", p.status().message()), 1;
    fmt::print("placement        {}\n", *p);
  }
  return 0;
}

Command make_info(CLI::App& parent) {
  auto* app = parent.add_subcommand("info", "Config summary, parameter counts, bytes by dtype, KV bytes per token");
  auto mo = std::make_shared<ModelOptions>();
  auto as_json = std::make_shared<bool>(false);
  auto plan = std::make_shared<bool>(false);
  auto steps = std::make_shared<std::string>("decode:1,decode:4,decode:64,decode:256,prefill:8192");
  auto context = std::make_shared<int64_t>(1024);
  auto kv = std::make_shared<std::string>("fp8");
  mo->add_to(app);
  mo->add_parallel_to(app);
  app->add_flag("--json", *as_json, "Machine-readable output");
  app->add_flag("--plan", *plan,
                "Every kernel a forward step runs on the CUDA backend (on GPU 0, or an H200 without one), for the "
                "steps of --plan-steps, with --cuda-options");
  app->add_option("--plan-steps", *steps, "decode:N (N sequences of one row) and prefill:N (one sequence of N rows), "
                                          "comma-separated")
      ->capture_default_str();
  app->add_option("--plan-context", *context, "Tokens of context of each decode sequence")->capture_default_str();
  app->add_option("--plan-kv-dtype", *kv, "KV cache dtype of the plan: fp8 | bf16")
      ->check(CLI::IsMember({"fp8", "bf16"}))
      ->capture_default_str();
  return {app, [mo, as_json, plan, steps, context, kv] {
            return *plan ? run_plan(*mo, *steps, *context, *kv) : run_info(*mo, *as_json);
          }};
}

}  // namespace

M2_REGISTER_COMMAND(info, 10, make_info);

}  // namespace m2::cli
