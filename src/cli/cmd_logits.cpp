// m2cpp logits: the logits of every position of a prompt, from one forward
// pass, as float32 [n_ids, vocab_size] in a .npy file; --routing-replay
// forces the experts of the first rows (a `generate --routing-capture` file).
#include "cli/commands.h"
#include "cli/model_options.h"
#include "cli/routing_file.h"
#include "io/npy.h"
#include "model/greedy.h"

namespace m2::cli {
namespace {

int run_logits(const ModelOptions& mo, const std::string& ids_text, const std::string& out, const std::string& kv,
               const std::string& routing_replay) {
  auto fail = [](const Status& s) { return fmt::print(stderr, "error: {}\n", s.message()), 1; };
  auto ids = parse_id_list(ids_text);
  if (!ids.ok()) return fail(ids.status());
  auto kv_dtype = parse_kv_dtype(kv);
  if (!kv_dtype.ok()) return fail(kv_dtype.status());
  auto m = mo.load_on_backend();
  if (!m.ok()) return fail(m.status());
  auto made = mo.make_model(*m->weights, *m->backend);
  if (!made.ok()) return fail(made.status());
  if (!*made) return 0;  // a node > 0: it ran node 0's steps
  MiniMaxM2& model = **made;
  std::vector<int32_t> routing;
  if (!routing_replay.empty()) {
    auto r = read_routing_file(routing_replay, int64_t{model.config().num_hidden_layers} * model.config().num_experts_per_tok);
    if (!r.ok()) return fail(r.status());
    routing = std::move(*r);
  }
  auto logits = all_logits(model, *ids, *kv_dtype, routing);
  if (!logits.ok()) return fail(routing_replay.empty() ? logits.status() : logits.status().with_context("--routing-replay"));
  const int64_t n = static_cast<int64_t>(ids->size());
  Status s = write_npy_f32(out, logits->data(), {n, model.config().vocab_size});
  if (!s.ok()) return fail(s);
  return 0;
}

Command make_logits(CLI::App& parent) {
  auto* app = parent.add_subcommand("logits", "Logits of every position of --ids, written as float32 .npy");
  auto mo = std::make_shared<ModelOptions>();
  auto ids = std::make_shared<std::string>();
  auto out = std::make_shared<std::string>();
  auto kv = std::make_shared<std::string>("f32");
  auto routing = std::make_shared<std::string>();
  mo->add_to(app);
  mo->add_parallel_to(app);
  app->add_option("--ids", *ids, "Comma-separated token ids")->required();
  app->add_option("--out", *out, "Output .npy path")->required();
  app->add_option("--kv-dtype", *kv, "KV cache dtype: f32, bf16 or fp8 (e4m3, one scale per token and head)");
  app->add_option("--routing-replay", *routing,
                  "Route the first rows as FILE says (int32 [rows, layers, top_k], a generate --routing-capture file)");
  return {app, [=] { return run_logits(*mo, *ids, *out, *kv, *routing); }};
}

}  // namespace

M2_REGISTER_COMMAND(logits, 20, make_logits);

}  // namespace m2::cli
