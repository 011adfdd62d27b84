// Offline engine throughput: N requests of fixed prompt/output lengths (random
// ids, an optional shared prefix) through the scheduler, KV cache and
// sampler, as fast as the backend goes. Prints throughput, time per step and
// the KV / prefix-cache statistics.
#include "cli/bench_engine.h"

#include <algorithm>
#include <chrono>
#include <fstream>
#include <random>

#include "cli/model_options.h"
#include "engine/engine.h"
#include "util/json.h"
#include "util/thread_pool.h"

namespace m2::cli {
namespace {

struct Args {
  int num_prompts = 32;
  int input_len = 256;
  int output_len = 64;
  double shared_prefix = 0.0;  // fraction of each prompt shared by all requests
  int max_num_seqs = 64;
  int64_t max_num_batched_tokens = 512;
  int64_t kv_cache_memory = 0;
  std::string kv = "bf16";
  std::string json_out;
};

int run(const ModelOptions& mo, const Args& a) {
  using clock = std::chrono::steady_clock;
  auto fail = [](const Status& s) { return fmt::print(stderr, "error: {}\n", s.message()), 1; };
  auto m = mo.load_on_backend();
  if (!m.ok()) return fail(m.status());
  auto made = mo.make_model(*m->weights, *m->backend);
  if (!made.ok()) return fail(made.status());
  if (!*made) return 0;  // a node > 0: it ran node 0's steps
  MiniMaxM2& model = **made;
  EngineConfig c;
  c.kv_dtype = parse_kv_dtype(a.kv).value();  // the option's check allows only valid names
  c.scheduler.max_num_seqs = a.max_num_seqs;
  c.scheduler.max_num_batched_tokens = a.max_num_batched_tokens;
  const KvCacheShape per = model.kv_shape(16, 1, c.kv_dtype);
  // Default budget: every request's whole context at once (no preemption).
  const int64_t all_at_once =
      static_cast<int64_t>(KvCache::storage_bytes(per)) * ((a.input_len + a.output_len) / 16 + 2) * a.num_prompts;
  auto kv_bytes = mo.kv_cache_bytes(*m, model, a.kv_cache_memory, all_at_once, a.max_num_batched_tokens, a.max_num_seqs);
  if (!kv_bytes.ok()) return fail(kv_bytes.status());
  c.kv_cache_bytes = *kv_bytes;
  auto engine = Engine::create(model, nullptr, c);
  if (!engine.ok()) return fail(engine.status());

  std::mt19937 rng(1);
  const int vocab = model.config().vocab_size;
  std::vector<int32_t> shared(static_cast<size_t>(a.input_len * a.shared_prefix));
  for (auto& t : shared) t = static_cast<int32_t>(rng() % vocab);
  SamplingParams p;
  p.temperature = 0.0f;
  p.max_tokens = a.output_len;
  p.ignore_eos = true;
  for (int i = 0; i < a.num_prompts; ++i) {
    std::vector<int32_t> prompt = shared;
    while (static_cast<int>(prompt.size()) < a.input_len) prompt.push_back(static_cast<int32_t>(rng() % vocab));
    Status s = (*engine)->add_request("r" + std::to_string(i), prompt, p);
    if (!s.ok()) return fail(s);
  }
  std::vector<double> step_s;
  int64_t out_tokens = 0, peak_blocks = 0;
  const auto t0 = clock::now();
  while ((*engine)->has_unfinished()) {
    const auto s0 = clock::now();
    auto outs = (*engine)->step();
    if (!outs.ok()) return fail(outs.status());
    step_s.push_back(std::chrono::duration<double>(clock::now() - s0).count());
    for (const auto& o : *outs) out_tokens += static_cast<int64_t>(o.new_token_ids.size());
    peak_blocks = std::max(peak_blocks, (*engine)->stats().kv_blocks_used);
  }
  const double total = std::chrono::duration<double>(clock::now() - t0).count();
  const EngineStats st = (*engine)->stats();
  std::vector<double> sorted = step_s;
  std::sort(sorted.begin(), sorted.end());
  const double median = sorted.empty() ? 0 : sorted[sorted.size() / 2];
  const double hit = st.prefix.queried_tokens ? double(st.prefix.hit_tokens) / st.prefix.queried_tokens : 0;
  const double in_tokens = double(a.num_prompts) * a.input_len;

  fmt::print("requests         {} x ({} prompt + {} output tokens), shared prefix {:.0f} %\n", a.num_prompts,
             a.input_len, a.output_len, a.shared_prefix * 100);
  fmt::print("engine           max {} seqs, {} tokens/step, KV {} ({} blocks of 16), {} threads\n", a.max_num_seqs,
             a.max_num_batched_tokens, dtype_name(c.kv_dtype), st.kv_blocks_total, ThreadPool::global().size());
  fmt::print("time             {:.2f} s, {} steps, median step {:.2f} ms\n", total, st.steps, median * 1e3);
  fmt::print("throughput       {:.2f} requests/s, {:.1f} output tokens/s, {:.1f} total tokens/s\n",
             a.num_prompts / total, out_tokens / total, (in_tokens + out_tokens) / total);
  fmt::print("tokens run       {} prefill, {} decode, {} preemptions\n", st.prefill_tokens, st.decode_tokens,
             st.preemptions);
  fmt::print("kv cache         peak {} of {} blocks\n", peak_blocks, st.kv_blocks_total);
  fmt::print("prefix cache     {:.1f} % hit ({} of {} prompt tokens), {} evictions\n", hit * 100,
             st.prefix.hit_tokens, st.prefix.queried_tokens, st.prefix.evictions);
  if (!a.json_out.empty()) {
    Json j = {{"num_prompts", a.num_prompts}, {"input_len", a.input_len}, {"output_len", a.output_len},
              {"seconds", total}, {"steps", st.steps}, {"median_step_s", median},
              {"output_tokens_per_s", out_tokens / total}, {"total_tokens_per_s", (in_tokens + out_tokens) / total},
              {"prefill_tokens", st.prefill_tokens}, {"decode_tokens", st.decode_tokens},
              {"preemptions", st.preemptions}, {"prefix_hit_rate", hit}, {"peak_kv_blocks", peak_blocks}};
    std::ofstream(a.json_out) << j.dump(2) << "\n";
  }
  return 0;
}

}  // namespace

std::function<int()> add_bench_engine(CLI::App* bench, CLI::App** sub) {
  auto* app = bench->add_subcommand("engine", "Offline engine throughput (no HTTP): N requests through the scheduler");
  auto mo = std::make_shared<ModelOptions>();
  auto a = std::make_shared<Args>();
  mo->add_to(app);
  mo->add_parallel_to(app);
  app->add_option("--num-prompts", a->num_prompts, "Requests");
  app->add_option("--input-len", a->input_len, "Prompt tokens per request");
  app->add_option("--output-len", a->output_len, "Generated tokens per request (EOS ignored)");
  app->add_option("--shared-prefix", a->shared_prefix, "Fraction of the prompt common to all requests (0..1)");
  app->add_option("--max-num-seqs", a->max_num_seqs, "Running sequences at once");
  app->add_option("--max-num-batched-tokens", a->max_num_batched_tokens, "Tokens per step");
  app->add_option("--kv-cache-memory", a->kv_cache_memory, "KV cache bytes (default: from --gpu-memory-utilization, else all requests at once)");
  app->add_option("--kv-dtype", a->kv, "f32, bf16 or fp8")->check(CLI::IsMember({"f32", "bf16", "fp8"}));
  app->add_option("--json", a->json_out, "Also write the figures to this JSON file");
  *sub = app;
  return [mo, a] { return run(*mo, *a); };
}

}  // namespace m2::cli
