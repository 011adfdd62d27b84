// m2cpp generate: greedy continuation of token ids, one token per step
// through the KV cache. Works without a tokenizer. --routing-capture and
// --routing-replay write and read every stepped row's expert ids, so two
// configurations (say -tp 1 and -tp 2) can be compared on the same routing.
#include "cli/commands.h"
#include "cli/model_options.h"
#include "cli/routing_file.h"
#include "model/greedy.h"
#include "util/json.h"

namespace m2::cli {
namespace {

struct GenerateArgs {
  std::string ids;
  int max_tokens = 16;
  double temperature = 0.0;
  bool ignore_eos = false;
  bool json = false;
  std::string kv = "f32";
  int prefill_chunk = 0;
  std::string routing_capture, routing_replay;  // routing_file.h
};

int run_generate(const ModelOptions& mo, const GenerateArgs& a) {
  auto fail = [](const Status& s) { return fmt::print(stderr, "error: {}\n", s.message()), 1; };
  if (a.temperature != 0.0)
    return fail(errorf("--temperature {}: only greedy decoding (0) is available here; sampling is in `run`/`serve`",
                       a.temperature));
  if (a.max_tokens < 1) return fail(errorf("--max-tokens must be at least 1"));
  auto ids = parse_id_list(a.ids);
  if (!ids.ok()) return fail(ids.status());
  auto m = mo.load_on_backend();
  if (!m.ok()) return fail(m.status());
  auto made = mo.make_model(*m->weights, *m->backend);
  if (!made.ok()) return fail(made.status());
  if (!*made) return 0;  // a node > 0: it ran node 0's steps
  MiniMaxM2& model = **made;
  GreedyOptions o;
  o.max_tokens = a.max_tokens;
  o.ignore_eos = a.ignore_eos;
  o.eos_ids = model_eos_ids(mo.model, model.config());
  o.kv_dtype = parse_kv_dtype(a.kv).value();  // the option's check allows only valid names
  o.prefill_chunk = a.prefill_chunk;
  std::vector<int32_t> replay, captured;
  if (!a.routing_replay.empty()) {
    auto r = read_routing_file(a.routing_replay, int64_t{model.config().num_hidden_layers} * model.config().num_experts_per_tok);
    if (!r.ok()) return fail(r.status());
    replay = std::move(*r);
    o.routing_in = replay;
  }
  if (!a.routing_capture.empty()) o.routing_out = &captured;
  auto out = generate_greedy(model, *ids, o);
  if (!out.ok()) return fail(a.routing_replay.empty() ? out.status() : out.status().with_context("--routing-replay"));
  if (!a.routing_capture.empty()) {
    if (Status s = write_routing_file(a.routing_capture, captured); !s.ok()) return fail(s);
  }
  if (a.json) {
    fmt::print("{}\n", Json{{"ids", *out}}.dump());
  } else {
    fmt::print("{}\n", fmt::join(*out, ","));
  }
  return 0;
}

Command make_generate(CLI::App& parent) {
  auto* app = parent.add_subcommand("generate", "Greedy generation from token ids (no tokenizer needed)");
  auto mo = std::make_shared<ModelOptions>();
  auto a = std::make_shared<GenerateArgs>();
  mo->add_to(app);
  mo->add_parallel_to(app);
  app->add_option("--ids", a->ids, "Comma-separated prompt token ids")->required();
  app->add_option("--max-tokens", a->max_tokens, "Tokens to generate");
  app->add_option("--temperature", a->temperature, "0 = greedy (the only mode of this command)");
  app->add_flag("--ignore-eos", a->ignore_eos, "Do not stop at end-of-sequence ids");
  app->add_flag("--json", a->json, "Print {\"ids\": [...]}");
  app->add_option("--kv-dtype", a->kv, "KV cache dtype: f32 or bf16")->check(CLI::IsMember({"f32", "bf16"}));
  app->add_option("--prefill-chunk", a->prefill_chunk, "Prompt tokens per forward step (0: all at once)");
  app->add_option("--routing-capture", a->routing_capture,
                  "Write every stepped row's expert ids to FILE (int32 [rows, layers, top_k])");
  app->add_option("--routing-replay", a->routing_replay,
                  "Route the first rows as FILE says (a --routing-capture file; later rows route freely)");
  return {app, [mo, a] { return run_generate(*mo, *a); }};
}

}  // namespace

M2_REGISTER_COMMAND(generate, 30, make_generate);

}  // namespace m2::cli
