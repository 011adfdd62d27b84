// One streaming request to an OpenAI-compatible server, timed: the body
// (/v1/completions with a prompt of token ids or text, or
// /v1/chat/completions with messages), `stream` with
// `stream_options.include_usage`, `ignore_eos` and `max_tokens` so that the
// output length is exact; then the SSE stream is read and every chunk that
// carries output (text, content, reasoning or tool calls) is timestamped on
// arrival.
#pragma once

#include <chrono>
#include <string>

#include "loadgen/http_client.h"
#include "loadgen/request_sample.h"
#include "util/json.h"

namespace m2::loadgen {

enum class Endpoint { kCompletions, kChat };

const char* endpoint_path(Endpoint e);

struct RequestOptions {
  Endpoint endpoint = Endpoint::kCompletions;
  std::string model;
  bool ignore_eos = true;
  double temperature = 0.0;
  Json extra_body = Json::object();  // merged over the body last (vLLM's --extra-body)
};

// `input` is the prompt (a list of ids or a string) for completions, the
// messages for chat.
std::string request_body(const RequestOptions& o, const Json& input, int64_t max_tokens);

// Sends the request and reads the whole stream; timings in the sample are
// relative to `level_start`. Never fails: errors are recorded in the sample.
RequestSample send_request(HttpClient& client, const RequestOptions& o, const Json& input, int64_t max_tokens,
                           std::chrono::steady_clock::time_point level_start);

// Reads one SSE event of a stream into the sample: returns false at [DONE].
// Output chunks are stamped `now_s` (seconds since the request was sent).
bool read_stream_event(const std::string& data, Endpoint endpoint, double now_s, double* last_chunk_s,
                       RequestSample* s);

}  // namespace m2::loadgen
