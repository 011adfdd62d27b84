// Structured access log: one JSON object per request on stderr (stdout
// stays free for command output), written when the response is complete.
#pragma once

#include <cstdint>
#include <string>

namespace m2::server {

struct AccessRecord {
  std::string remote, method, path, request_id, finish_reason;
  std::string x_request_id;        // the id the answer's x-request-id carries (request_headers.h)
  int status = 0;
  double duration_ms = 0;
  double ttft_ms = -1;             // generation requests: time to the first token
  int64_t prompt_tokens = -1, completion_tokens = -1, cached_tokens = -1;
  bool stream = false;
};

void log_access(const AccessRecord& record);

}  // namespace m2::server
