// What the serving benchmark records of one request: when it was sent, its
// time to first token, the gaps between the chunks that followed, its end,
// and the token counts the server reported in `usage`.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "util/json.h"

namespace m2::loadgen {

struct RequestSample {
  int64_t id = 0;              // dispatch order within its level
  int session = -1, turn = 0;  // agentic workload: which session and turn (0-based)
  double start_s = 0;          // when it was sent, seconds after the level started
  double ttft_s = -1;          // time to the first chunk carrying output (-1: none came)
  double e2e_s = 0;            // time to the end of the response
  std::vector<double> itl_s;   // gaps between successive output chunks
  int64_t prompt_len = 0;      // prompt tokens as the client built the prompt
  int64_t expected_output_len = 0;  // max_tokens sent (with ignore_eos: the exact length expected)
  int64_t prompt_tokens = -1;  // usage.prompt_tokens (-1: not reported)
  int64_t output_tokens = 0;   // usage.completion_tokens, else the number of output chunks
  int64_t cached_tokens = -1;  // usage.prompt_tokens_details.cached_tokens (-1: not reported)
  int64_t chunks = 0;          // output chunks received
  bool usage_reported = false;
  bool success = false;
  std::string error;
  // The reply, kept for the next turn of an agentic session (not written out).
  std::string reply_content, reply_reasoning;

  // Mean time per output token after the first: (e2e - ttft) / (out - 1), or
  // -1 when fewer than two tokens came.
  double tpot_s() const;
  // Prompt tokens as the server counted them when it said, else as built.
  int64_t input_tokens() const { return prompt_tokens >= 0 ? prompt_tokens : prompt_len; }
};

Json sample_json(const RequestSample& s);

}  // namespace m2::loadgen
