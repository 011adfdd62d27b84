// What the serving benchmark sends: sessions of one or more turns.
//   random    one turn: `input_len` tokens (ids drawn from an English-text
//             pool, sent as ids to /v1/completions, or as a text of exactly
//             that many tokens to chat), the first `shared_prefix_len`
//             common to every request
//   sharegpt  one turn: the first human/assistant exchange of a ShareGPT
//             JSON file (vLLM's filters: 4..1024 prompt tokens, <= 2048 in
//             all); the output length is the reference answer's unless set
//   agentic   `turns` turns: a system prompt shared by every session
//             (tool definitions), a task, then each turn resends the whole
//             history plus the model's reply and a new tool result
#pragma once

#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "loadgen/openai_request.h"
#include "loadgen/token_source.h"
#include "util/json.h"

namespace m2::loadgen {

enum class DatasetKind { kRandom, kShareGpt, kAgentic };

struct WorkloadConfig {
  DatasetKind kind = DatasetKind::kRandom;
  Endpoint endpoint = Endpoint::kCompletions;
  int64_t input_len = 1024;
  int64_t output_len = 1024;
  bool output_len_set = false;     // sharegpt: override the reference answers' lengths
  int64_t shared_prefix_len = 0;   // random, agentic: tokens of the prompt common to all sessions
  int turns = 4;                   // agentic
  int64_t tool_len = 300;          // agentic: tokens of each tool result
  std::string dataset_path;        // sharegpt
};

struct Session {
  Json first_input;                // turn 0: the prompt (ids or text) or the chat messages
  int64_t first_len = 0;           // its tokens as built
  std::vector<Json> tool_results;  // turns 1..: ids (completions) or text (chat)
  std::vector<int64_t> tool_lens;
  int64_t output_len = 0;

  int turns() const { return 1 + static_cast<int>(tool_results.size()); }
};

class Workload {
 public:
  static Result<std::unique_ptr<Workload>> create(const WorkloadConfig& config, TokenSource& tokens, uint64_t seed);

  // `n` new sessions (distinct prompts for every call; the shared prefix is
  // the same for the whole run).
  Result<std::vector<Session>> sessions(int n);

 private:
  Workload(const WorkloadConfig& config, TokenSource& tokens, uint64_t seed)
      : config_(config), tokens_(tokens), rng_(seed) {}
  Result<std::vector<Session>> generated(int n);
  Result<std::vector<Session>> sharegpt(int n);
  // `n` tokens of the pool: ids (completions) or exact text (chat).
  Result<std::pair<Json, int64_t>> random_piece(int64_t n);

  WorkloadConfig config_;
  TokenSource& tokens_;
  std::mt19937_64 rng_;
  std::vector<int32_t> pool_;
  Json shared_;  // the shared prefix: ids, or the system prompt's text
  int64_t shared_tokens_ = 0;
  std::vector<std::pair<std::string, std::string>> conversations_;  // sharegpt: (prompt, answer)
  size_t next_conversation_ = 0;
};

// Turn `turn` + 1's input: the previous input, the reply of `turn`, and the
// tool result `turn`. Completions: ids extended by the reply's ids (encoded
// by `tokens`) and the tool ids; chat: an assistant message with one tool
// call, and a tool message answering it. Returns the tokens added.
Result<int64_t> extend_history(const Session& s, int turn, const std::string& reply,
                               const std::string& reasoning, Endpoint endpoint, TokenSource& tokens, Json* input);

}  // namespace m2::loadgen
