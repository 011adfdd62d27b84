// m2cpp bench: measured performance beside the machine's own ceilings.
//   bench roofline   memory bandwidth and matrix throughput of the host or a GPU
//   bench decode     decode of a model (e.g. dummy weights at the real M2
//                    shape): at batch 1, tokens/s and the fraction of the
//                    measured memory bandwidth that the bytes read per token
//                    reach; with --batch N, output tokens/s of N sequences
#include <chrono>
#include <cmath>
#include <fstream>
#include <random>

#include "backend/cpu/roofline.h"
#include "cli/bench_prompt.h"
#include "cli/bench_allreduce.h"
#include "cli/bench_engine.h"
#include "cli/bench_plot.h"
#include "cli/bench_serve.h"
#include "cli/commands.h"
#include "cli/model_options.h"
#include "model/greedy.h"
#include "model/minimax_m2.h"
#include "util/cpu_features.h"
#include "util/json.h"
#include "util/thread_pool.h"
#ifdef M2CPP_WITH_CUDA
#include "backend/cuda/cuda_backend.h"
#endif

namespace m2::cli {
namespace {

using clock = std::chrono::steady_clock;

uint64_t bytes_of(const TensorView& t) { return t.empty() ? 0 : t.nbytes(); }
uint64_t bytes_of(const Linear& l) { return bytes_of(l.weight) + bytes_of(l.scale_inv); }
// One routed expert's bytes (w1, w2, w3 with their scales).
uint64_t bytes_of(const ExpertWeights& e) { return bytes_of(e.w1) + bytes_of(e.w2) + bytes_of(e.w3); }

// Weight and KV bytes one decode step of `batch` sequences must read: every
// dense weight, the experts the batch touches (batch 1: top_k; more: the
// expected number of distinct experts when each token picks top_k of E
// uniformly, E (1 - (1 - k/E)^batch)), one embedding row per token, the
// head, and every sequence's whole KV history in every layer.
double decode_bytes_per_step(const ModelWeights& w, int64_t batch, int64_t context, DType kv_dtype,
                             double* experts_touched = nullptr) {
  const ModelConfig& c = w.config;
  const double E = c.num_local_experts, k = c.num_experts_per_tok;
  const double touched = batch == 1 ? k : E * (1.0 - std::pow(1.0 - k / E, static_cast<double>(batch)));
  if (experts_touched) *experts_touched = touched;
  // K or V of one token in one layer: FP8 codes carry an fp32 scale per kv head.
  const double kv_bytes_per_token =
      static_cast<double>(c.kv_dim()) * dtype_size(kv_dtype) +
      (kv_dtype == DType::kF8E4M3 ? c.num_key_value_heads * sizeof(float) : 0.0);
  double b = static_cast<double>(batch) * c.hidden_size * dtype_size(w.embed.dtype) + bytes_of(w.final_norm) +
             bytes_of(w.lm_head);
  for (const LayerWeights& L : w.layers) {
    b += bytes_of(L.input_norm) + bytes_of(L.post_attention_norm) + bytes_of(L.q_norm) + bytes_of(L.k_norm);
    b += bytes_of(L.q_proj) + bytes_of(L.k_proj) + bytes_of(L.v_proj) + bytes_of(L.o_proj);
    b += bytes_of(L.router) + bytes_of(L.router_bias);
    const ExpertWeights& e = L.experts[0];
    b += touched * bytes_of(e);
    b += 2.0 * batch * context * kv_bytes_per_token;
  }
  return b;
}

// FLOPs of prefilling `tokens` tokens in one causal pass: 2 per weight of a
// token's path (dense projections, router, top_k experts) per token, plus
// QK^T and PV over the causal triangle; the head runs for the last row only.
double prefill_flops(const ModelWeights& w, int64_t tokens) {
  const ModelConfig& c = w.config;
  double per_token = 0;
  for (const LayerWeights& L : w.layers) {
    for (const Linear* l : {&L.q_proj, &L.k_proj, &L.v_proj, &L.o_proj})
      per_token += 2.0 * l->out_features() * l->in_features();
    per_token += 2.0 * c.num_local_experts * c.hidden_size;  // router
    per_token += 2.0 * c.num_experts_per_tok * 3.0 * c.intermediate_size * c.hidden_size;
  }
  const double attn = c.num_hidden_layers * 4.0 * c.num_attention_heads * c.head_dim * (tokens * (tokens + 1) / 2.0);
  return per_token * tokens + attn + 2.0 * w.lm_head.out_features() * w.lm_head.in_features();
}

struct DecodeArgs {
  int64_t context = 1024;
  int batch = 1;
  int tokens = 16;
  int prefill_chunk = 256;
  std::string kv = "bf16";
  std::string json_out;
};

// Wall time of `n` calls of `step`, in seconds (the first failing call's
// status otherwise).
struct StepTimes {
  double median = 0, mean = 0;
};
template <class Step>
Result<StepTimes> time_steps(int n, Step step) {
  std::vector<double> times;
  for (int i = 0; i < n; ++i) {
    const auto t0 = clock::now();
    M2_RETURN_IF_ERROR(step());
    times.push_back(std::chrono::duration<double>(clock::now() - t0).count());
  }
  std::sort(times.begin(), times.end());
  StepTimes t{times[times.size() / 2], 0};
  for (double x : times) t.mean += x / times.size();
  return t;
}

int run_roofline(const std::string& device) {
#ifdef M2CPP_WITH_CUDA
  if (const int gpu = parse_cuda_device(device); gpu >= 0) {
    const CudaCeilings c = cuda_measure_ceilings(gpu, true);
    if (c.copy_bytes_per_s <= 0) return fmt::print(stderr, "error: --device {}: no CUDA device\n", device), 1;
    fmt::print("gpu {}            device-to-device copy {:.0f} GB/s (read + write)\n", gpu, c.copy_bytes_per_s / 1e9);
    fmt::print("gpu {}            cuBLASLt dense GEMM: BF16 {:.0f} TFLOP/s, FP8 {:.0f} TFLOP/s\n", gpu,
               c.bf16_flops / 1e12, c.fp8_flops / 1e12);
    return 0;
  }
#endif
  if (device != "cpu") return fmt::print(stderr, "error: --device {}: not available in this build\n", device), 1;
  const auto bw = cpu::measure_read_bandwidth();
  const double flops = cpu::measure_matmul_flops(), peak = cpu::measure_fma_peak();
  fmt::print("cpu kernels      {} ({} threads)\n", isa_name(active_isa()), bw.threads);
  fmt::print("memory read      {:.1f} GB/s ({} MiB buffer, best of 5)\n", bw.bytes_per_second / 1e9,
             bw.buffer_bytes >> 20);
  fmt::print("fp32 FMA peak    {:.1f} GFLOP/s (independent vector FMA chains, all threads)\n", peak / 1e9);
  fmt::print("fp32 matmul      {:.1f} GFLOP/s (64x1024x1024, cache-resident) = {:.0f} % of the FMA peak\n",
             flops / 1e9, 100 * flops / peak);
  return 0;
}

// The memory ceiling decode is compared with, and its name: the host's read
// bandwidth, or on a GPU its device-to-device copy bandwidth (bytes read +
// bytes written, measured before the weights take the memory).
std::pair<double, std::string> memory_ceiling(const ModelOptions& mo) {
#ifdef M2CPP_WITH_CUDA
  if (const int gpu = parse_cuda_device(mo.device); gpu >= 0)
    return {cuda_measure_ceilings(gpu, false).copy_bytes_per_s, "GPU copy"};
#endif
  return {cpu::measure_read_bandwidth().bytes_per_second, "host read"};
}

int fail(const Status& s) { return fmt::print(stderr, "error: {}\n", s.message()), 1; }

// What both decode benchmarks start from: the memory ceiling (measured
// before the weights take the memory), the model on its backend, the KV dtype.
struct DecodeBench {
  double ceiling;
  std::string ceiling_name;
  LoadedModel loaded;
  DType kv_dtype;
  int host_layers = 0;      // layers whose experts the CPU computes (--n-cpu-moe)
  int host_threads = 0;
  int host_max_tokens = 0;
  double host_read_bw = 0;  // the host's read bandwidth, measured before loading (with them)
};

// The time the CPU has spent on host-resident experts so far (0 without).
double host_expert_seconds(const DecodeBench& d) {
#ifdef M2CPP_WITH_CUDA
  if (d.host_layers > 0) return cuda_host_experts(*d.loaded.backend).cpu_seconds;
#endif
  return 0;
}

int run_decode(const ModelOptions& mo, const DecodeArgs& a, const DecodeBench& d, MiniMaxM2& model) {
  const double ceiling = d.ceiling;
  const std::string& ceiling_name = d.ceiling_name;
  const LoadedModel& loaded = d.loaded;
  const DType kv_dtype = d.kv_dtype;
  const ModelConfig& c = model.config();
  SingleSequence seq(model, a.context + a.tokens + 1, 16, kv_dtype);
  auto step = [&](const std::vector<int32_t>& toks, int64_t pos, std::vector<float>* logits) {
    return seq.run(toks, pos, false, model, logits);
  };

  // Prefill the context with random tokens, timed warm: a first chunk of
  // random tokens drawn the same way (bench_prompt.h) is run once before
  // (into the same positions, overwritten after), since the first pass at a
  // shape also pays one-time costs a server pays at start-up (lazy loading
  // of GPU kernels, cuBLASLt algorithm searches: ~0.1 s on an H200; the
  // experts' first reads). That cold pass is timed and printed too.
  const BenchPrompt prompt = bench_prompt(a.context, a.prefill_chunk, c.vocab_size);
  std::vector<float> logits;
  double cold_s = 0;
  if (a.context > 0) {
    const auto c0 = clock::now();
    Status s = step(prompt.warmup, 0, &logits);
    if (!s.ok()) return fail(s);
    cold_s = std::chrono::duration<double>(clock::now() - c0).count();
  }
  const auto p0 = clock::now();
  for (int64_t p = 0; p < a.context; p += a.prefill_chunk) {
    const auto first = prompt.context.begin() + p;
    const std::vector<int32_t> toks(first, first + std::min<int64_t>(a.prefill_chunk, a.context - p));
    Status s = step(toks, p, &logits);
    if (!s.ok()) return fail(s);
  }
  const double prefill_s = std::chrono::duration<double>(clock::now() - p0).count();

  // Decode: greedy, one token per step, feeding back the argmax.
  int64_t pos = a.context;
  auto next = [&] { return static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin()); };
  if (a.context == 0) logits.assign(c.vocab_size, 0.0f);
  Status s;
  for (int i = 0; i < 2; ++i) {  // warm-up steps (page faults, thread wake-up; the GPU records its step graph)
    s = step({next()}, pos++, &logits);
    if (!s.ok()) return fail(s);
  }
  const double cpu_s0 = host_expert_seconds(d);
  auto times = time_steps(a.tokens, [&] { return step({next()}, pos++, &logits); });
  if (!times.ok()) return fail(times.status());
  const double median = times->median, mean = times->mean;
  const double cpu_s_per_token = (host_expert_seconds(d) - cpu_s0) / std::max<int64_t>(a.tokens, 1);
  const int64_t ctx_mid = a.context + 1 + a.tokens / 2;
  const uint64_t bytes = static_cast<uint64_t>(decode_bytes_per_step(*loaded.weights, 1, ctx_mid, kv_dtype));
  const double achieved = bytes / median;

  fmt::print("model            {} layers of {} ({} experts, top-{}), {} weights\n", c.num_hidden_layers,
             mo.model, c.num_local_experts, c.num_experts_per_tok, mo.load_format);
  fmt::print("device           {} (cpu: {} kernels, {} threads)\n", mo.device, isa_name(active_isa()),
             ThreadPool::global().size());
  fmt::print("prefill          {} tokens in {:.3f} s ({:.1f} tokens/s; warm: the first chunk of {}, run once before, took {:.3f} s)\n",
             a.context, prefill_s, a.context / std::max(prefill_s, 1e-9), std::min<int64_t>(a.prefill_chunk, a.context), cold_s);
  double peak = 0, fma_peak = 0;  // FP8 dense GEMM peak of the GPU / fp32 FMA peak of the CPU, measured now
  bool on_gpu = false;
#ifdef M2CPP_WITH_CUDA
  if (const int gpu = parse_cuda_device(mo.device); gpu >= 0) {
    on_gpu = true;
    if (a.prefill_chunk >= a.context && a.context > 0) peak = cuda_measure_ceilings(gpu, true).fp8_flops;
  }
#endif
  const double pf = a.context > 0 ? prefill_flops(*loaded.weights, a.context) / std::max(prefill_s, 1e-9) : 0;
  if (peak > 0)
    fmt::print("prefill FLOP/s   {:.1f} TFLOP/s vs {:.0f} TFLOP/s measured cuBLASLt FP8 peak = {:.1f} %\n", pf / 1e12,
               peak / 1e12, 100.0 * pf / peak);
  if (!on_gpu && a.context > 0) {  // the CPU's ceiling: its fp32 FMA peak, measured now
    fma_peak = cpu::measure_fma_peak();
    fmt::print("prefill FLOP/s   {:.1f} GFLOP/s vs {:.1f} GFLOP/s measured fp32 FMA peak = {:.1f} %\n", pf / 1e9,
               fma_peak / 1e9, 100.0 * pf / fma_peak);
  }
  fmt::print("decode           {} steps at context {}..{}: median {:.2f} ms/token, mean {:.2f} ms ({:.2f} tokens/s)\n",
             a.tokens, a.context + 1, pos - 1, median * 1e3, mean * 1e3, 1.0 / median);
  fmt::print("bytes/token      {:.1f} MB (weights of the token's path + KV in {})\n", bytes / 1e6,
             dtype_name(kv_dtype));
  fmt::print("bandwidth        {:.1f} GB/s achieved vs {:.1f} GB/s measured {} ceiling = {:.0f} %\n",
             achieved / 1e9, ceiling / 1e9, ceiling_name, 100.0 * achieved / ceiling);
  double offload_ceiling_s = 0;
  if (d.host_layers > 0) {
    // Experts in host memory: the CPU reads its layers' experts at the host's
    // read bandwidth while the GPU waits, the GPU reads the rest at its own.
    const double host_bytes = d.host_layers * c.num_experts_per_tok *
                              static_cast<double>(bytes_of(loaded.weights->layers[0].experts[0]));
    const double gpu_bytes = bytes - host_bytes;
    offload_ceiling_s = host_bytes / d.host_read_bw + gpu_bytes / ceiling;
    fmt::print("host experts     {} layers on the CPU ({} threads): {:.1f} MB/token at {:.1f} GB/s measured host read "
               "= {:.2f} ms, + {:.1f} MB on the GPU = {:.2f} ms: ceiling {:.2f} ms/token ({:.2f} tokens/s); achieved "
               "{:.0f} %\n",
               d.host_layers, d.host_threads, host_bytes / 1e6, d.host_read_bw / 1e9, 1e3 * host_bytes / d.host_read_bw,
               gpu_bytes / 1e6, 1e3 * gpu_bytes / ceiling, 1e3 * offload_ceiling_s, 1.0 / offload_ceiling_s,
               100.0 * offload_ceiling_s / median);
    fmt::print("time split       CPU experts {:.2f} ms/token ({:.1f} GB/s of the host's {:.1f}), the rest (GPU layers, "
               "transfers, waits) {:.2f} ms\n",
               1e3 * cpu_s_per_token, host_bytes / std::max(cpu_s_per_token, 1e-12) / 1e9, d.host_read_bw / 1e9,
               1e3 * (mean - cpu_s_per_token));
  }
  if (!a.json_out.empty()) {
    Json j = {{"layers", c.num_hidden_layers},     {"context", a.context},
              {"median_s_per_token", median},      {"mean_s_per_token", mean},
              {"tokens_per_s", 1.0 / median},      {"bytes_per_token", bytes},
              {"achieved_bytes_per_s", achieved},  {"ceiling_bytes_per_s", ceiling},
              {"fraction_of_ceiling", achieved / ceiling}, {"device", mo.device}, {"ceiling", ceiling_name},
              {"isa", std::string(isa_name(active_isa()))}, {"threads", ThreadPool::global().size()},
              {"prefill_tokens_per_s", a.context / std::max(prefill_s, 1e-9)},
              {"prefill_flops_per_s", pf}, {"fp8_peak_flops", peak}, {"fma_peak_flops", fma_peak},
              {"prefill_first_chunk_cold_s", cold_s},
              {"host_expert_layers", d.host_layers}, {"host_read_bytes_per_s", d.host_read_bw},
              {"offload_ceiling_s_per_token", offload_ceiling_s}};
    std::ofstream(a.json_out) << j.dump(2) << "\n";
  }
  return 0;
}

// Decode at batch B: B sequences of `context` tokens each, one new token per
// sequence per step, sampled (greedy) on the model's backend as the engine does.
// The contexts' KV entries are not computed (prefilling B x context tokens
// would dominate the run and their values do not change the work of a
// step); each sequence reads its own KV blocks.
int run_decode_batch(const ModelOptions& mo, const DecodeArgs& a, const DecodeBench& d, MiniMaxM2& model) {
  const double ceiling = d.ceiling;
  const std::string& ceiling_name = d.ceiling_name;
  const LoadedModel& loaded = d.loaded;
  const DType kv_dtype = d.kv_dtype;
  const ModelConfig& c = model.config();
  const int bs = 16, B = a.batch;
  const int64_t per_seq = (a.context + a.tokens + 3 + bs - 1) / bs;
  auto cache = model.make_kv_cache(bs, per_seq * B, kv_dtype);
  std::vector<std::vector<int32_t>> tables(B);
  for (int b = 0; b < B; ++b)
    for (int64_t i = 0; i < per_seq; ++i) tables[b].push_back(static_cast<int32_t>(b * per_seq + i));
  std::mt19937 rng(1);
  std::vector<int32_t> last(B);
  for (auto& t : last) t = static_cast<int32_t>(rng() % c.vocab_size);
  int64_t pos = a.context;
  auto step = [&] {
    StepInput in;
    for (int b = 0; b < B; ++b) {
      in.tokens.push_back(last[b]);
      in.positions.push_back(static_cast<int32_t>(pos));
      in.slots.push_back(static_cast<int64_t>(tables[b][pos / bs]) * bs + pos % bs);
      in.seqs.push_back({b, 1, pos + 1, tables[b]});
      in.logit_rows.push_back(b);
    }
    // Greedy, sampled where the logits are (as the engine does).
    std::vector<SampleRow> rows(B);
    for (auto& r : rows) r.temperature = 0.0f;
    std::vector<SampledToken> out(B);
    Status s = model.forward_sample(in, *cache, rows, out);
    for (int b = 0; b < B && s.ok(); ++b) last[b] = out[b].id;
    ++pos;
    return s;
  };
  for (int i = 0; i < 3; ++i) {  // warm-up: scratch growth, then the step graph is recorded
    Status s = step();
    if (!s.ok()) return fail(s);
  }
  const double cpu_s0 = host_expert_seconds(d);
  auto times = time_steps(a.tokens, step);
  if (!times.ok()) return fail(times.status());
  const double median = times->median;
  const double cpu_s_per_step = (host_expert_seconds(d) - cpu_s0) / std::max<int64_t>(a.tokens, 1);
  // The step's bandwidth ceiling, at the middle context of the timed steps.
  double touched = 0;
  const double bytes = decode_bytes_per_step(*loaded.weights, B, a.context + 4 + a.tokens / 2, kv_dtype, &touched);
  const double ceiling_tps = B * ceiling / bytes, tps = B / median;
  fmt::print("model            {} layers of {} ({} experts, top-{}), {} weights\n", c.num_hidden_layers, mo.model,
             c.num_local_experts, c.num_experts_per_tok, mo.load_format);
  fmt::print("device           {}\n", mo.device);
  fmt::print("decode           batch {}, {} steps at context {}..{}: median {:.2f} ms/step = {:.1f} output tokens/s\n",
             B, a.tokens, a.context + 4, pos, median * 1e3, tps);
  fmt::print("bytes/step       {:.1f} MB (dense weights, {:.1f} of {} experts per layer expected under uniform "
             "routing, head, KV in {})\n",
             bytes / 1e6, touched, c.num_local_experts, dtype_name(kv_dtype));
  fmt::print("ceiling          {:.1f} output tokens/s at {:.1f} GB/s measured {} = {:.0f} % reached\n", ceiling_tps,
             ceiling / 1e9, ceiling_name, 100.0 * tps / ceiling_tps);
  if (d.host_layers > 0) {
    // The CPU reads the touched experts of its layers at the host's bandwidth.
    const double host_bytes =
        d.host_layers * touched * static_cast<double>(bytes_of(loaded.weights->layers[0].experts[0]));
    const double ceil_s = host_bytes / d.host_read_bw + (bytes - host_bytes) / ceiling;
    fmt::print("host experts     {} layers ({} threads, CPU up to {} tokens a step): {:.1f} MB/step from host memory; "
               "CPU experts {:.2f} ms/step ({:.1f} GB/s of the host's {:.1f}); ceiling {:.2f} ms/step = {:.1f} output "
               "tokens/s; {:.0f} % reached\n",
               d.host_layers, d.host_threads, d.host_max_tokens, host_bytes / 1e6, 1e3 * cpu_s_per_step,
               cpu_s_per_step > 0 ? host_bytes / cpu_s_per_step / 1e9 : 0.0, d.host_read_bw / 1e9, 1e3 * ceil_s,
               B / ceil_s, 100.0 * ceil_s / median);
  }
  if (!a.json_out.empty()) {
    Json j = {{"layers", c.num_hidden_layers}, {"context", a.context},     {"batch", B},
              {"median_s_per_step", median},   {"tokens_per_s", tps},       {"device", mo.device},
              {"bytes_per_step", bytes},       {"experts_touched_per_layer", touched},
              {"ceiling_bytes_per_s", ceiling}, {"ceiling_tokens_per_s", ceiling_tps},
              {"fraction_of_ceiling", tps / ceiling_tps}, {"ceiling", ceiling_name}};
    std::ofstream(a.json_out) << j.dump(2) << "\n";
  }
  return 0;
}

// bench decode: batch 1 beside the memory bandwidth, or --batch N.
int run_decode_bench(ModelOptions mo, const DecodeArgs& a) {
  mo.apply_threads();
  // --n-cpu-moe auto keeps room for the contexts it times.
  mo.auto_kv_tokens = static_cast<int64_t>(a.batch) * (a.context + 256);
  mo.auto_kv_dtype = a.kv, mo.auto_step_tokens = std::max<int64_t>(a.batch, 2048), mo.auto_logit_rows = a.batch;
  auto [ceiling, ceiling_name] = memory_ceiling(mo);
  const bool offload = mo.cpu_moe || (!mo.n_cpu_moe.empty() && mo.n_cpu_moe != "0");
  const double host_bw = offload ? cpu::measure_read_bandwidth().bytes_per_second : 0;
  auto m = mo.load_on_backend();
  if (!m.ok()) return fail(m.status());
  // The option's check allows only valid KV dtype names.
  DecodeBench d{ceiling, std::move(ceiling_name), std::move(*m), parse_kv_dtype(a.kv).value()};
#ifdef M2CPP_WITH_CUDA
  if (offload) {
    const HostExpertInfo h = cuda_host_experts(*d.loaded.backend);
    d.host_layers = h.layers, d.host_threads = h.threads, d.host_read_bw = host_bw, d.host_max_tokens = h.max_cpu_tokens;
  }
#endif
  auto model = mo.make_model(*d.loaded.weights, *d.loaded.backend);
  if (!model.ok()) return fail(model.status());
  if (!*model) return 0;  // a node > 0: it ran node 0's steps
  return a.batch > 1 ? run_decode_batch(mo, a, d, **model) : run_decode(mo, a, d, **model);
}

Command make_bench(CLI::App& parent) {
  auto* app = parent.add_subcommand("bench", "Benchmarks, each printed beside the machine's measured ceiling");
  app->require_subcommand(1);
  auto* roof = app->add_subcommand("roofline",
                                   "Measure memory bandwidth and matrix throughput of the host (--device cpu) or a GPU");
  auto roof_device = std::make_shared<std::string>("cpu");
  roof->add_option("--device", *roof_device, "cpu, or cuda[:N] in CUDA builds");
  auto* dec = app->add_subcommand("decode", "Decode speed: batch 1 beside the memory bandwidth, or --batch N");
  auto mo = std::make_shared<ModelOptions>();
  auto a = std::make_shared<DecodeArgs>();
  mo->add_to(dec);
  mo->add_parallel_to(dec);
  dec->add_option("--context", a->context, "Tokens of context before decoding");
  dec->add_option("--tokens", a->tokens, "Decode steps to time");
  dec->add_option("--batch", a->batch, "Sequences decoded together (above 1: output tokens/s of the batch)")
      ->check(CLI::Range(1, 4096));
  dec->add_option("--prefill-chunk", a->prefill_chunk, "Prompt tokens per prefill step");
  dec->add_option("--kv-dtype", a->kv, "f32, bf16 or fp8 (e4m3, one scale per token and kv head)")
      ->check(CLI::IsMember({"f32", "bf16", "fp8"}));
  dec->add_option("--json", a->json_out, "Also write the figures to this JSON file");
  CLI::App* eng = nullptr;
  auto run_engine = add_bench_engine(app, &eng);
  // Serving benchmark of any OpenAI-compatible server, and its Pareto plots.
  CLI::App *serve = nullptr, *plot = nullptr;
  auto run_serve = add_bench_serve(app, &serve);
  auto run_plot = add_bench_plot(app, &plot);
  CLI::App* allreduce = nullptr;
  auto run_allreduce = add_bench_allreduce(app, &allreduce);
  return {app, [roof, roof_device, dec, eng, run_engine, serve, run_serve, plot, run_plot, allreduce, run_allreduce, mo, a] {
            if (eng->parsed()) return run_engine();
            if (allreduce->parsed()) return run_allreduce();
            if (serve->parsed()) return run_serve();
            if (plot->parsed()) return run_plot();
            if (roof->parsed()) return run_roofline(*roof_device);
            if (dec->parsed()) return run_decode_bench(*mo, *a);
            return 1;
          }};
}

}  // namespace

M2_REGISTER_COMMAND(bench, 90, make_bench);

}  // namespace m2::cli
