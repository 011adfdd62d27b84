// m2cpp serve: the OpenAI- and Anthropic-compatible HTTP server. Every flag
// is checked before anything loads; then it binds (GET /health answers 503
// until the model is loaded), loads the tokenizer, chat template and
// --replay file (seconds: a missing one fails before a long weight load),
// then the model, runs the engine on its own thread and serves until
// SIGTERM/SIGINT, then shuts down gracefully: new connections are refused,
// new requests get 503, running ones finish within --shutdown-timeout and
// are cancelled past it; a second signal exits at once.
#include <csignal>

#include <chrono>
#include <filesystem>
#include <limits>
#include <memory>
#include <thread>

#include <unistd.h>

#include "cli/commands.h"
#include "cli/flag_checks.h"
#include "cli/model_options.h"
#include "cli/shutdown_signals.h"
#include "engine/constraint.h"
#include "engine/engine_loop.h"
#include "model/node_group.h"
#include "model/weight_update.h"
#include "server/rollout_routes.h"
#include "server/server.h"
#include "util/fd_limit.h"
#include "util/log.h"

namespace m2::cli {
namespace {

struct ServeArgs {
  std::string host = "127.0.0.1";
  int port = 8000;
  std::vector<std::string> served_model_names;
  std::string api_key;
  int64_t max_model_len = 0;
  std::string reasoning = "split";
  int max_num_seqs = 256;
  int64_t max_num_batched_tokens = 2048;
  int64_t kv_cache_memory = 0;
  int block_size = 16;
  std::string kv_cache_dtype = "auto";
  bool prefix_caching = true;
  size_t max_waiting = 1024;
  std::string replay;
  int io_threads = 2;
  int request_threads = 2;
  size_t request_queue = 64;
  size_t max_body_bytes = 32u << 20;
  size_t max_inflight_body_bytes = 256u << 20;
  double rate_limit = 0;        // requests/s per client address; 0: none
  double rate_limit_burst = 0;  // 0: max(1, rate_limit)
  size_t max_connections = 1024;
  size_t max_stream_buffer_bytes = 256u << 10;
  double stream_stall_timeout = 60;  // seconds
  int idle_timeout = 75;             // seconds
  size_t max_header_bytes = 64u << 10;
  double shutdown_timeout = 30;
  bool disable_access_log = false;
  double step_delay_ms = 0;
  size_t responses_store_bytes = 64u << 20;
  std::vector<std::string> allowed_origins;
  bool enable_weight_updates = false;
  std::string thinking_key_file;
  std::string admin_api_key;
};

// The last component of a model directory ("models/m2-demo/" -> "m2-demo"):
// what clients are shown instead of a path on the server.
std::string dir_name(const std::string& dir) {
  std::filesystem::path p = std::filesystem::path(dir).lexically_normal();
  if (p.filename().empty()) p = p.parent_path();
  return p.filename().string();
}

// --max-connections, kept under the file-descriptor limit (raised to the
// hard limit first) with room for the model's files, logs and the
// connection being refused: at the fd limit the kernel, not the server,
// would refuse, and silently.
size_t connection_cap(size_t wanted) {
  const FdLimit fds = raise_fd_limit();
  if (fds.soft > fds.before) log_info("m2cpp serve: file descriptor limit raised from {} to {}", fds.before, fds.soft);
  const uint64_t reserve = std::min<uint64_t>(128, fds.soft / 4);
  const uint64_t room = fds.soft > reserve ? fds.soft - reserve : 1;
  if (wanted <= room) return wanted;
  log_warn("m2cpp serve: --max-connections {} does not fit the file descriptor limit {} (hard limit {}): at most {} "
           "connections (raise the limit with ulimit -n)",
           wanted, fds.soft, fds.hard, room);
  return static_cast<size_t>(room);
}

// The limits' cross-checks, before anything loads (each flag's own range is
// checked by CLI11): a budget of bodies in flight smaller than one body
// would refuse every large request; a burst without a rate limits nothing.
Status check_limits(const ServeArgs& a) {
  if (a.max_inflight_body_bytes != 0 && a.max_inflight_body_bytes < a.max_body_bytes)
    return errorf("--max-inflight-body-bytes {} is smaller than --max-request-body-bytes {}: a body of the largest "
                  "allowed size could never be read (raise it, or 0 for no limit)",
                  a.max_inflight_body_bytes, a.max_body_bytes);
  if (a.rate_limit_burst > 0 && a.rate_limit == 0)
    return errorf("--rate-limit-burst {} needs --rate-limit (requests per second per client)", a.rate_limit_burst);
  return Status();
}

int run_serve(ModelOptions mo, const ServeArgs& a) {
  auto fail = [](const Status& s) { return log_error("serve: {}", s.message()), 1; };
  const bool bundled = mo.model.empty();
  if (bundled) mo.model = default_model_dir();  // the bundled demo model
  if (mo.model.empty())
    return fail(errorf("no -m given and no bundled model found (models/m2-demo); set -m DIR or M2CPP_MODEL"));
  if (Status s = mo.check(); !s.ok()) return fail(s);
  if (Status s = check_limits(a); !s.ok()) return fail(s);
  ShutdownSignals signals;  // before any other thread starts
  std::signal(SIGPIPE, SIG_IGN);
  // A node > 0 of a multi-node job serves no HTTP: it runs node 0's steps
  // until node 0 ends (a signal ends it at once: nothing of its own to drain).
  if (Result<NodeConfig> node = mo.nodes.resolve(mo.tensor_parallel_size); node.ok() && node->node_rank > 0) {
    auto loaded = mo.load_on_backend();
    if (!loaded.ok()) return fail(loaded.status());
    auto made = mo.make_model(*loaded->weights, *loaded->backend);
    return made.ok() ? 0 : fail(made.status());
  }

  server::ServerContext ctx;
  // The name clients use: the -m argument as given (vLLM's default), or the
  // bundled model's directory name (its path is this machine's business).
  const std::string default_name = bundled ? dir_name(mo.model) : mo.model;
  ctx.options.served_model_names = a.served_model_names.empty() ? std::vector<std::string>{default_name}
                                                                 : a.served_model_names;
  if (server::first_literal_name(ctx.options.served_model_names).empty())
    return fail(errorf("--served-model-name: give at least one name that is not a pattern (the name responses "
                       "report), e.g. --served-model-name m2 'claude-*'"));
  ctx.metrics.set_model_name(ctx.model_name());
  ctx.options.allowed_origins = a.allowed_origins;
  ctx.options.api_key = a.api_key;
  ctx.options.reasoning =
      a.reasoning == "append-think" ? text::ReasoningMode::kAppendThink : text::ReasoningMode::kSplit;
  ctx.options.access_log = !a.disable_access_log;
  ctx.options.model_root = dir_name(mo.model);
  ctx.options.request_threads = a.request_threads;
  ctx.options.request_queue = a.request_queue;
  ctx.responses.set_capacity(a.responses_store_bytes);
  ctx.options.enable_weight_updates = a.enable_weight_updates;
  ctx.options.admin_api_key = a.admin_api_key;
  if (!a.thinking_key_file.empty()) {  // before the model loads: a bad file stops at once
    auto signer = server::ThinkingSigner::from_key_file(a.thinking_key_file);
    if (!signer.ok()) return fail(signer.status());
    ctx.thinking_signer = *signer;
  }

  server::HttpServerConfig http;
  http.host = a.host;
  http.port = a.port;
  http.io_threads = a.io_threads;
  http.max_body_bytes = a.max_body_bytes;
  http.max_connections = connection_cap(a.max_connections);
  http.retry_after_s = ctx.options.retry_after_s;
  http.max_output_buffer_bytes = a.max_stream_buffer_bytes;
  http.stall_timeout = std::chrono::milliseconds(static_cast<int64_t>(a.stream_stall_timeout * 1000));
  http.max_inflight_body_bytes = a.max_inflight_body_bytes;
  http.idle_timeout = std::chrono::seconds(a.idle_timeout);
  http.max_header_bytes = a.max_header_bytes;
  http.rate_limit = a.rate_limit;
  http.rate_limit_burst = a.rate_limit_burst;
  auto srv = server::Server::create(http, ctx);
  if (!srv.ok()) return fail(srv.status());
  (*srv)->start();
  log_info("m2cpp serve: listening on http://{}:{}", a.host, (*srv)->port());
  if (a.enable_weight_updates)
    log_warn("m2cpp serve: --enable-weight-updates: POST /pause_generation, /update_weights_from_disk, ... are served "
             "({})", !a.admin_api_key.empty() ? "with --admin-api-key" : !a.api_key.empty() ? "with --api-key" : "without a key");
  if (!(*srv)->http().loopback() && a.api_key.empty())
    log_warn("m2cpp serve: --host {} accepts connections from other machines and no --api-key is set: anyone who "
             "can reach port {} can use the model",
             a.host, (*srv)->port());

  auto tokenizer = text::Tokenizer::load_from_dir(mo.model);
  if (!tokenizer.ok()) return fail(tokenizer.status().with_context("the server needs the model's tokenizer"));
  auto chat_template = text::ChatTemplate::load_from_dir(mo.model);
  if (!chat_template.ok()) return fail(chat_template.status().with_context("the server needs a chat template"));
  std::unique_ptr<server::ReplaySource> replay;
  if (!a.replay.empty()) {
    auto r = server::ReplaySource::load(a.replay, **tokenizer);
    if (!r.ok()) return fail(r.status().with_context("--replay"));
    replay = std::make_unique<server::ReplaySource>(std::move(*r));
    log_warn("--replay {}: generation replays {} fixed output(s) (a test source, not the model)", a.replay,
             replay->size());
  }

  // --n-cpu-moe auto keeps room for a KV cache of --max-model-len x --max-num-seqs.
  if (auto c = load_config_from(mo.model); c.ok()) {
    const int64_t len = a.max_model_len > 0 ? a.max_model_len : c->max_position_embeddings;
    mo.auto_kv_tokens = len * a.max_num_seqs;
  }
  mo.auto_kv_dtype = a.kv_cache_dtype;
  // --n-cpu-moe auto sized the GPU's share for a budget; the KV cache then
  // takes what that budget leaves (not the small default pool).
  if (mo.n_cpu_moe == "auto" && mo.gpu_memory_utilization == 0 && a.kv_cache_memory == 0) {
    mo.gpu_memory_utilization = 0.9;
    log_info("--n-cpu-moe auto: --gpu-memory-utilization 0.9 (the budget it placed the experts in)");
  }
  mo.auto_step_tokens = a.max_num_batched_tokens, mo.auto_logit_rows = a.max_num_seqs;
  auto loaded = mo.load_on_backend();
  if (!loaded.ok()) return fail(loaded.status());
  // The served weight set; weight updates (docs/rollout.md) swap in others.
  server::RolloutControl rollout(wrap_loaded_weights(std::move(loaded->weights)), dir_name(mo.model),
                                 loaded->backend->reads_weight_views());
  auto made = mo.make_model(rollout.current()->weights(), *loaded->backend);
  if (!made.ok()) return fail(made.status());
  if (!*made) return 0;  // a node > 0: it ran node 0's steps
  MiniMaxM2& model = **made;
  // (After the model: a GPU group's ranks have prepared their shards.)
  auto kv_bytes = mo.kv_cache_bytes(*loaded, model, a.kv_cache_memory, 0, a.max_num_batched_tokens, a.max_num_seqs);
  if (!kv_bytes.ok()) return fail(kv_bytes.status());
  if (NodeGroup* nodes = model.node_group())  // a lost node ends the job: the graceful shutdown, then exit 1
    nodes->watch([](const Status& why) {
      log_error("m2cpp serve: {}: stopping", why.message());
      kill(getpid(), SIGTERM);
    });

  EngineConfig ec;
  ec.block_size = a.block_size;
  ec.kv_cache_bytes = *kv_bytes;
  ec.kv_dtype = parse_kv_dtype(a.kv_cache_dtype).value();  // the option's check allows only valid names
  ec.prefix_cache = a.prefix_caching;
  ec.max_model_len = a.max_model_len;
  ec.scheduler.max_num_seqs = a.max_num_seqs;
  ec.scheduler.max_num_batched_tokens = a.max_num_batched_tokens;
  ec.eos_ids = model_eos_ids(mo.model, model.config());
  ec.record_decode_graphs = true;  // (as vLLM: graph memory spent at start-up, not as batch sizes arrive)
  auto engine = Engine::create(model, tokenizer->get(), ec);
  if (!engine.ok()) return fail(engine.status());
  EngineLoop loop(**engine, a.max_waiting,
                  std::chrono::microseconds(static_cast<int64_t>(a.step_delay_ms * 1000)));
  loop.start();

  // Constrained decoding's vocabulary (the token bytes, sorted for the
  // grammar engine): built once, before the server is ready.
  std::vector<int32_t> stop_ids = ec.eos_ids;
  if (auto eos = (*tokenizer)->eos_id()) stop_ids.push_back(*eos);
  auto constraints = ConstraintCompiler::create(**tokenizer, model.config().vocab_size, stop_ids);
  if (!constraints.ok()) log_warn("m2cpp serve: no constrained decoding: {}", constraints.status().message());
  ctx.constraints = constraints.ok() ? constraints->get() : nullptr;
  ctx.tokenizer = tokenizer->get();
  ctx.chat_template = &*chat_template;
  ctx.loop = &loop;
  ctx.replay = replay.get();
  ctx.defaults = default_sampling_params(mo.model);
  ctx.max_model_len = (*engine)->max_model_len();
  ctx.vocab_size = model.config().vocab_size;
  ctx.num_layers = model.config().num_hidden_layers;
  ctx.top_k = model.config().num_experts_per_tok;
  ctx.num_experts = model.config().num_local_experts;
  ctx.rollout = &rollout;
  ctx.ready.store(true);  // publishes the fields above to the I/O threads
  signals.set_ready();
  const EngineStats st = (*engine)->stats();
  log_info("m2cpp serve: ready: model '{}', max model length {}, {} KV blocks of {} tokens", ctx.model_name(),
           ctx.max_model_len, st.kv_blocks_total, a.block_size);

  const int sig = signals.wait();
  log_info("m2cpp serve: signal {}: shutting down (grace period {} s; a second signal exits at once)", sig,
           a.shutdown_timeout);
  ctx.draining.store(true);
  (*srv)->http().stop_accepting();
  const auto grace = std::chrono::milliseconds(static_cast<int64_t>(a.shutdown_timeout * 1000));
  if (!loop.wait_idle(grace)) {
    log_warn("m2cpp serve: cancelling {} unfinished request(s)", loop.num_unfinished());
    loop.cancel_all(errorf("the server is shutting down"));
    loop.wait_idle(std::chrono::seconds(5));
  }
  // Lets the last responses leave their buffers before the sockets close.
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  (*srv)->stop();  // the request threads first: they submit to the loop
  loop.stop(errorf("the server stopped"));
  log_info("m2cpp serve: stopped");
  if (NodeGroup* nodes = model.node_group(); nodes && !nodes->failure().ok())
    return fail(errorf("the node group failed: {}", nodes->failure().message()));
  return 0;
}

Command make_serve(CLI::App& parent) {
  auto* app = parent.add_subcommand("serve", "OpenAI- and Anthropic-compatible HTTP server");
  auto mo = std::make_shared<ModelOptions>();
  auto a = std::make_shared<ServeArgs>();
  mo->add_to(app, /*model_required=*/false);
  mo->add_parallel_to(app);
  constexpr int64_t kIntMax = std::numeric_limits<int>::max();
  constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();
  app->add_option("--host", a->host, "Address or host name to bind (default loopback only)")->check(non_empty());
  app->add_option("--port", a->port, "Port (0: any free port, printed at start)")->check(int_range(0, 65535));
  app->add_option("--served-model-name", a->served_model_names,
                  "Model name(s) the API answers to (default: the -m argument); * and ? match any run / one character "
                  "('claude-*'); the first name without them is reported")
      ->check(non_empty());
  app->add_option("--allowed-origins", a->allowed_origins,
                  "CORS: origins whose browser pages may call the API ('https://app.example', or '*'); default none")
      ->check(non_empty());
  app->add_option("--api-key", a->api_key, "Require this key (Authorization: Bearer, or x-api-key) on /v1 routes")
      ->check(non_empty());
  app->add_option("--max-model-len", a->max_model_len, "Context length (default: the model's, capped by the KV pool)")
      ->check(int_range(2, kInt64Max));
  app->add_option("--reasoning", a->reasoning,
                  "OpenAI chat: split (reasoning_content) or append-think ('<think>' + all in content)")
      ->check(CLI::IsMember({"split", "append-think"}));
  app->add_option("--max-num-seqs", a->max_num_seqs, "Sequences running at once")->check(int_range(1, kIntMax));
  app->add_option("--max-num-batched-tokens", a->max_num_batched_tokens, "Tokens per engine step")
      ->check(int_range(1, kIntMax));
  app->add_option("--kv-cache-memory", a->kv_cache_memory,
                  "KV cache bytes (default: from --gpu-memory-utilization, else 256 MiB)")
      ->check(int_range(1, kInt64Max));
  app->add_option("--block-size", a->block_size, "Tokens per KV block")->check(int_range(1, 1024));
  app->add_option("--kv-cache-dtype", a->kv_cache_dtype, "auto (bf16), bf16, fp8 or f32")
      ->check(CLI::IsMember({"auto", "bf16", "fp8", "f32"}));
  app->add_flag("--enable-prefix-caching,!--no-enable-prefix-caching", a->prefix_caching,
                "Reuse KV blocks of shared prompt prefixes (default on)");
  app->add_option("--max-waiting", a->max_waiting,
                  "Requests that may wait for a slot before new ones get 429 + Retry-After (0: no limit)")
      ->check(int_range(0, kInt64Max));
  app->add_option("--replay", a->replay, "TEST ONLY: emit this raw M2 output instead of sampling (see server/replay.h)")
      ->check(non_empty());
  app->add_option("--io-threads", a->io_threads, "Threads serving the sockets")->check(int_range(1, 256));
  app->add_option("--request-threads", a->request_threads,
                  "Threads that parse, template and tokenize request bodies (off the I/O threads)")
      ->check(int_range(1, 256));
  app->add_option("--request-queue", a->request_queue,
                  "Request bodies that may wait for a request thread before new ones get 503 + Retry-After")
      ->check(int_range(1, 1 << 20));
  app->add_option("--max-request-body-bytes", a->max_body_bytes, "Larger request bodies get 413")
      ->check(int_range(1, kInt64Max));
  app->add_option("--max-inflight-body-bytes", a->max_inflight_body_bytes,
                  "Request-body bytes held at once over all connections (received, queued, parsed); a body that "
                  "does not fit gets 503 + Retry-After (0: no limit)")
      ->check(int_range(0, kInt64Max));
  app->add_option("--rate-limit", a->rate_limit,
                  "Requests per second per client address; more get 429 + Retry-After (0: no limit; /health and "
                  "/metrics are exempt)")
      ->check(number_range(0, 1e6));
  app->add_option("--rate-limit-burst", a->rate_limit_burst,
                  "Requests a client may send at once before --rate-limit applies (default: max(1, rate))")
      ->check(number_range(0, 1e6));
  app->add_option("--max-connections", a->max_connections,
                  "Connections open at once; more get 503 + Retry-After (kept under the file descriptor limit)")
      ->check(int_range(1, 1 << 24));
  app->add_option("--max-stream-buffer-bytes", a->max_stream_buffer_bytes,
                  "Response bytes a connection may hold unsent before its generation pauses (backpressure)")
      ->check(int_range(1024, kInt64Max));
  app->add_option("--stream-stall-timeout", a->stream_stall_timeout,
                  "Seconds a paused response may wait for its client to read before the connection is closed and "
                  "the request cancelled")
      ->check(positive_number(86400));
  app->add_option("--idle-timeout", a->idle_timeout,
                  "Seconds a connection may stay idle between requests, or take to send one, before it is closed")
      ->check(int_range(1, 86400));
  app->add_option("--max-header-bytes", a->max_header_bytes,
                  "Bytes of a request's line and headers; a larger head gets 431")
      ->check(int_range(1024, 1 << 30));
  app->add_option("--shutdown-timeout", a->shutdown_timeout,
                  "Seconds running requests may take to finish after SIGTERM before they are cancelled")
      ->check(number_range(0, 86400));
  app->add_option("--responses-store-bytes", a->responses_store_bytes,
                  "Memory for stored /v1/responses (previous_response_id, GET); least recently used dropped past "
                  "it; 0: none stored")
      ->check(int_range(0, kInt64Max));
  app->add_flag("--disable-access-log", a->disable_access_log, "No per-request JSON line on stderr");
  app->add_option("--thinking-key-file", a->thinking_key_file,
                  "Key of the thinking-block signatures (Anthropic thinking, Responses encrypted reasoning): its "
                  "SHA-256 is the HMAC key; created with a random key when missing, so restarts and replicas "
                  "accept each other's signatures (default: a random key per process)")
      ->check(non_empty());
  app->add_flag("--enable-weight-updates", a->enable_weight_updates,
                "Serve the rollout control routes of an RL trainer: pause/continue generation, flush the prefix "
                "cache, update weights from disk or tensor buckets (docs/rollout.md)");
  app->add_option("--admin-api-key", a->admin_api_key,
                  "Key of the rollout control routes (default: the --api-key, when set)")
      ->check(non_empty());
  app->add_option("--step-delay-ms", a->step_delay_ms, "TEST ONLY: pause after every engine step (slows generation)")
      ->check(number_range(0, 60000));
  return {app, [mo, a] { return run_serve(*mo, *a); }};
}

}  // namespace

M2_REGISTER_COMMAND(serve, 50, make_serve);

}  // namespace m2::cli
