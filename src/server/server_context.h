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
#include "server/replay.h"
#include "server/thinking_signature.h"
#include "text/chat_template.h"
#include "text/reasoning_parser.h"
#include "text/tokenizer/tokenizer.h"

namespace m2::server {

struct ServerOptions {
  std::vector<std::string> served_model_names;  // the first is reported; all are accepted
  std::string api_key;                           // empty: no authentication
  text::ReasoningMode reasoning = text::ReasoningMode::kSplit;  // OpenAI chat only
  bool access_log = true;
  int retry_after_s = 1;                         // Retry-After of 429 / 503
  std::string model_root;                        // the -m directory's last component, reported as the model's root
  int request_threads = 2;                       // threads parsing, templating and tokenizing request bodies
  size_t request_queue = 64;                     // bodies that may wait for one before new ones get 503
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
  Metrics metrics;
  ThinkingSigner thinking_signer;     // signs and checks Anthropic thinking blocks
  Heartbeat heartbeat{std::chrono::seconds(1)};  // keeps quiet streams alive (Anthropic pings)
  std::atomic<bool> ready{false};     // the model is loaded: generation routes are served
  std::atomic<bool> draining{false};  // shutting down: new generation requests get 503

  const std::string& model_name() const { return options.served_model_names.front(); }
  bool serves(const std::string& name) const {
    for (const auto& n : options.served_model_names)
      if (n == name) return true;
    return false;
  }
};

}  // namespace m2::server
