#include "server/rollout_routes.h"

#include <chrono>

#include "server/json_fields.h"
#include "server/routes.h"
#include "server/server.h"
#include "text/chat_request.h"
#include "util/log.h"

namespace m2::server {

std::string RolloutControl::version_label() const {
  std::lock_guard<std::mutex> lock(mu_);
  return label_;
}

std::shared_ptr<WeightSet> RolloutControl::current() const {
  std::lock_guard<std::mutex> lock(mu_);
  return current_;
}

void RolloutControl::commit(std::shared_ptr<WeightSet> next, const std::string& label) {
  std::shared_ptr<WeightSet> old;
  {
    std::lock_guard<std::mutex> lock(mu_);
    old = std::move(current_);
    current_ = std::move(next);
    label_ = label;
  }
  version_.fetch_add(1);
  // `old` goes here: its replaced buffers no other set shares are freed.
}

namespace {

HttpResponse json_response(int status, const OrderedJson& j) {
  HttpResponse r;
  r.status = status;
  r.body = dump_json(j);
  return r;
}

bool is_admin_route(const std::string& path) {
  return path == "/pause_generation" || path == "/continue_generation" || path == "/flush_cache" ||
         path == "/update_weights_from_disk" || path == "/update_weights_from_tensor" ||
         path == "/init_weights_update_group" || path == "/update_weights_from_distributed";
}

OrderedJson model_info(const ServerContext& ctx) {
  const RolloutControl& rc = *ctx.rollout;
  const ModelConfig& c = rc.config();
  OrderedJson config = {{"model_type", c.model_type},
                        {"num_hidden_layers", c.num_hidden_layers},
                        {"hidden_size", c.hidden_size},
                        {"intermediate_size", c.intermediate_size},
                        {"num_attention_heads", c.num_attention_heads},
                        {"num_key_value_heads", c.num_key_value_heads},
                        {"head_dim", c.head_dim},
                        {"vocab_size", c.vocab_size},
                        {"num_local_experts", c.num_local_experts},
                        {"num_experts_per_tok", c.num_experts_per_tok},
                        {"dtype", dtype_name(c.dtype)},
                        {"fp8", c.fp8.has_value()}};
  OrderedJson j = {{"model_path", rc.model_path()},
                   {"tokenizer_path", rc.model_path()},
                   {"served_model_name", ctx.model_name()},
                   {"is_generation", true},
                   {"weights_version", rc.version()},
                   {"weight_version", rc.version_label()},
                   {"max_model_len", ctx.max_model_len},
                   {"weight_updates_enabled", ctx.options.enable_weight_updates},
                   {"generation_paused", ctx.loop->paused()},
                   {"config", std::move(config)}};
  if (auto p = rc.buckets.pending()) j["pending_bucket_set"] = {{"bucket_set", p->first}, {"received", p->second}};
  return j;
}

// The swap on the engine thread, then the answer (from that thread: the
// writer is thread-safe). Releases the update slot.
void apply_update(ServerContext& ctx, std::shared_ptr<HttpRequest> request, std::shared_ptr<ResponseWriter> writer,
                  std::shared_ptr<WeightSet> next, std::string label, size_t num_tensors, std::string what) {
  ctx.loop->post([&ctx, request, writer, next = std::move(next), label, num_tensors, what](Engine& engine) mutable {
    const auto t0 = std::chrono::steady_clock::now();
    Status s = engine.swap_weights(next->weights());
    RolloutControl& rc = *ctx.rollout;
    if (!s.ok()) {
      rc.end();
      log_error("{}: the swap failed, the old weights still serve: {}", what, s.message());
      return respond_logged(ctx, *request, *writer,
                            json_response(500, {{"success", false},
                                                {"message", "the weights could not be swapped in (the old ones still "
                                                            "serve): " + s.message()}}));
    }
    // A backend with copies of its own reads the new host bytes no more.
    if (!rc.backend_reads_weight_views())
      if (Status r = release_replaced_bytes(*next); !r.ok())
        log_warn("{}: the replaced tensors' host bytes are kept: {}", what, r.message());
    rc.commit(std::move(next), label);
    rc.end();
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    log_info("{}: {} tensors replaced, weights version {} ({:.1f} ms on the engine thread)", what, num_tensors,
             rc.version(), ms);
    respond_logged(ctx, *request, *writer,
                   json_response(200, {{"success", true},
                                       {"message", fmt::format("{} tensors replaced; prefix cache flushed", num_tensors)},
                                       {"weights_version", rc.version()},
                                       {"weight_version", label},
                                       {"num_tensors", num_tensors}}));
  });
}

}  // namespace

bool is_rollout_route(const std::string& path) {
  return is_admin_route(path) || path == "/get_model_info" || path == "/get_weight_version";
}

void handle_rollout_route(ServerContext& ctx, std::shared_ptr<HttpRequest> request,
                          std::shared_ptr<ResponseWriter> writer) {
  const std::string& path = request->path;
  const ServerError error(ctx, *request, *writer);
  auto ok = [&](const OrderedJson& j) { respond_logged(ctx, *request, *writer, json_response(200, j)); };
  const bool admin = is_admin_route(path);
  const std::string& key = admin && !ctx.options.admin_api_key.empty() ? ctx.options.admin_api_key : ctx.options.api_key;
  if (!key.empty()) {
    std::string_view given = request->header("x-api-key");
    const std::string_view auth = request->header("authorization");
    if (auth.size() > 7 && (auth.substr(0, 7) == "Bearer " || auth.substr(0, 7) == "bearer ")) given = auth.substr(7);
    if (!secure_equals(given, key))
      return error(401, admin ? "invalid or missing admin API key" : "invalid or missing API key", "", "invalid_api_key");
  }
  if (admin && !ctx.options.enable_weight_updates)
    return error(404, "no route for " + request->method + " " + path +
                          " (the rollout control routes need m2cpp serve --enable-weight-updates)");
  const char* method = admin ? "POST" : "GET";
  if (request->method != method && !(!admin && request->method == "HEAD")) {
    ApiError e = bad_request(std::string("use ") + method + " for " + path);
    e.status = 405;
    HttpResponse r = error_response(e, ApiFlavor::kOpenAI);
    r.headers.emplace_back("Allow", method);
    return respond_logged(ctx, *request, *writer, std::move(r));
  }
  if (!ctx.rollout) return error(503, "the model is loading");
  RolloutControl& rc = *ctx.rollout;
  if (path == "/get_model_info") return ok(model_info(ctx));
  if (path == "/get_weight_version")
    return ok({{"weights_version", rc.version()}, {"weight_version", rc.version_label()}});
  if (path == "/init_weights_update_group" || path == "/update_weights_from_distributed")
    return error(501, path + " is not implemented: NCCL weight broadcast from trainer ranks depends on the many-GPU "
                              "work (tensor/expert parallelism); use /update_weights_from_tensor or "
                              "/update_weights_from_disk");
  if (path == "/update_weights_from_tensor") {
    // Binary body: the bucket's safetensors bytes.
    const std::map<std::string, std::string> query = parse_query(request->target);
    std::map<std::string, std::string> metadata;
    const std::string what = "bucket " + (query.count("bucket_index") ? query.at("bucket_index") : std::string("?")) +
                             " of set '" + (query.count("bucket_set") ? query.at("bucket_set") : std::string("?")) + "'";
    auto tensors = parse_safetensors_bytes(request->body, what, &metadata);
    if (!tensors.ok()) return error(400, tensors.status().message(), "body");
    auto header = bucket_header(query, metadata);
    if (!header.ok()) return error(400, header.status().message(), "bucket_set");
    if (!rc.try_begin()) return error(409, "another weight update is being applied; send this bucket again after it");
    const std::shared_ptr<WeightSet> cur = rc.current();
    if (Status s = check_update_tensors(cur->weights(), *tensors); !s.ok()) {
      rc.buckets.drop(header->set_id);
      rc.end();
      return error(400, s.message() + " (the bucket set is dropped; nothing was replaced)", "body");
    }
    auto added = rc.buckets.add(*header, std::move(*tensors));
    if (!added.ok()) {
      rc.end();
      return error(400, added.status().message(), "bucket_index");
    }
    if (!added->dropped_set.empty())
      log_warn("/update_weights_from_tensor: set '{}' was incomplete when set '{}' began; dropped", added->dropped_set,
               header->set_id);
    if (!added->complete) {
      rc.end();
      return ok({{"success", true},
                 {"complete", false},
                 {"bucket_set", header->set_id},
                 {"received", added->received},
                 {"bucket_count", header->count},
                 {"weights_version", rc.version()}});
    }
    const size_t n = added->tensors.size();
    auto next = build_updated_weights(*cur, std::move(added->tensors));
    if (!next.ok()) {
      rc.end();
      return error(400, next.status().message() + " (nothing was replaced)", "body");
    }
    const std::string label = query.count("weight_version") ? query.at("weight_version")
                              : metadata.count("weight_version") ? metadata.at("weight_version")
                                                                 : header->set_id;
    return apply_update(ctx, request, writer, std::move(*next), label, n, "/update_weights_from_tensor");
  }

  auto parsed = text::parse_ordered_json(request->body.empty() ? std::string("{}") : request->body, "request body");
  if (!parsed.ok()) return error(400, parsed.status().message());
  const OrderedJson& body = *parsed;
  if (!body.is_object()) return error(400, std::string("the request body must be a JSON object, got ") + json_type(body));

  if (path == "/pause_generation") {
    auto mode = opt_string(body, "mode");
    if (!mode.ok()) return error(400, mode.status().message(), "mode");
    const std::string m = mode->value_or("abort");
    PauseMode pm;
    if (m == "abort") pm = PauseMode::kAbort;
    else if (m == "wait") pm = PauseMode::kWait;
    else if (m == "in_place") pm = PauseMode::kInPlace;
    else if (m == "retract") pm = PauseMode::kRetract;
    else return error(400, "mode must be one of abort, wait, in_place, retract; got '" + m + "'", "mode");
    ctx.loop->pause(pm, [&ctx, request, writer, m](size_t n) {
      respond_logged(ctx, *request, *writer,
                     json_response(200, {{"success", true}, {"mode", m}, {"num_requests", n},
                                         {"message", "generation paused"}}));
    });
    return;
  }
  if (path == "/continue_generation") {
    const bool was = ctx.loop->resume();
    return ok({{"success", true}, {"was_paused", was}, {"message", "generation continues"}});
  }
  if (path == "/flush_cache") {
    // SGLang's rule: not while requests run (their blocks would mix), unless paused.
    if (!ctx.loop->paused() && ctx.loop->num_unfinished() > 0)
      return error(400, fmt::format("{} requests are running: flush the cache when none is, or pause generation first",
                                    ctx.loop->num_unfinished()));
    ctx.loop->post([&ctx, request, writer](Engine& engine) {
      const int64_t n = engine.flush_prefix_cache();
      respond_logged(ctx, *request, *writer,
                     json_response(200, {{"success", true}, {"blocks_flushed", n}, {"message", "prefix cache flushed"}}));
    });
    return;
  }
  if (path == "/update_weights_from_disk") {
    auto dir = opt_string(body, "model_path");
    if (!dir.ok()) return error(400, dir.status().message(), "model_path");
    if (!*dir || (*dir)->empty()) return error(400, "model_path: a checkpoint directory is required", "model_path");
    auto label = opt_string(body, "weight_version");
    if (!label.ok()) return error(400, label.status().message(), "weight_version");
    if (!rc.try_begin()) return error(409, "another weight update is being applied; try again after it");
    auto read = read_update_dir(**dir, rc.config(), rc.backend_reads_weight_views());
    if (!read.ok()) {
      rc.end();
      return error(400, read.status().message() + " (nothing was replaced)", "model_path");
    }
    const size_t n = read->tensors.size();
    auto next = build_updated_weights(*rc.current(), std::move(read->tensors), std::move(read->checkpoint));
    if (!next.ok()) {
      rc.end();
      return error(400, next.status().message() + " (nothing was replaced)", "model_path");
    }
    return apply_update(ctx, request, writer, std::move(*next), label->value_or(**dir), n, "/update_weights_from_disk");
  }
  error(404, "no route for " + request->method + " " + path);
}

}  // namespace m2::server
