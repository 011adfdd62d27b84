// What every route handler reads: the model's tokenizer and chat template,
// the engine loop, the server's options, the metrics. Filled once the model
// is loaded (`ready`); immutable afterwards except the metrics and flags.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "engine/constraint.h"
#include "engine/engine_loop.h"
#include "server/heartbeat.h"
#include "server/metrics.h"
#include "server/model_names.h"
#include "server/replay.h"
#include "server/response_store.h"
#include "server/thinking_signature.h"
#include "text/chat_template.h"
#include "text/reasoning_parser.h"
#include "text/tokenizer/tokenizer.h"

namespace m2::server {

class RolloutControl;

struct ServerOptions {
  // Names and patterns (model_names.h) accepted; the first literal one is
  // reported. Filled with at least one literal name (cmd_serve checks).
  std::vector<std::string> served_model_names;
  std::vector<std::string> allowed_origins;      // CORS: exact origins, or "*"; empty: none
  std::string api_key;                           // empty: no authentication
  text::ReasoningMode reasoning = text::ReasoningMode::kSplit;  // OpenAI chat only
  bool access_log = true;
  int retry_after_s = 1;                         // Retry-After of 429 / 503
  std::string model_root;                        // the -m directory's last component, reported as the model's root
  int request_threads = 2;                       // threads parsing, templating and tokenizing request bodies
  size_t request_queue = 64;                     // bodies that may wait for one before new ones get 503
  bool enable_weight_updates = false;            // the rollout control routes (docs/rollout.md)
  std::string admin_api_key;                     // their key; empty: api_key
};

struct ServerContext {
  ServerOptions options;
  const text::Tokenizer* tokenizer = nullptr;
  const text::ChatTemplate* chat_template = nullptr;
  EngineLoop* loop = nullptr;
  const ReplaySource* replay = nullptr;
  const ConstraintCompiler* constraints = nullptr;  // grammars over the model's vocabulary; null: none
  SamplingParams defaults;
  int64_t max_model_len = 0;
  int vocab_size = 0;
  int num_layers = 0, top_k = 0, num_experts = 0;  // routed experts' shape (routed_experts.h)
  RolloutControl* rollout = nullptr;  // weights, version, admin routes (rollout_routes.h); set with the model
  Metrics metrics;
  ResponseStore responses;            // /v1/responses stored for previous_response_id, GET and DELETE
  ThinkingSigner thinking_signer;     // signs and checks Anthropic thinking blocks
  Heartbeat heartbeat{std::chrono::seconds(1)};  // keeps quiet streams alive (Anthropic pings)
  std::atomic<bool> ready{false};     // the model is loaded: generation routes are served
  std::atomic<bool> draining{false};  // shutting down: new generation requests get 503

  // The first literal name (a pattern is no model id).
  const std::string& model_name() const {
    for (const auto& n : options.served_model_names)
      if (!is_name_pattern(n)) return n;
    return options.served_model_names.front();
  }
  bool serves(const std::string& name) const { return serves_name(options.served_model_names, name); }
};

}  // namespace m2::server
