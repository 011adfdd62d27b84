#include "server/access_log.h"

#include <chrono>
#include <cstdio>

#include "util/json.h"

namespace m2::server {

void log_access(const AccessRecord& r) {
  const auto now = std::chrono::system_clock::now().time_since_epoch();
  OrderedJson j = OrderedJson::object();
  j["ts"] = std::chrono::duration<double>(now).count();
  j["event"] = "access";
  j["remote"] = r.remote;
  j["method"] = r.method;
  j["path"] = r.path;
  j["status"] = r.status;
  j["duration_ms"] = r.duration_ms;
  if (!r.request_id.empty()) j["request_id"] = r.request_id;
  if (!r.x_request_id.empty()) j["x_request_id"] = r.x_request_id;
  if (r.prompt_tokens >= 0) {
    j["stream"] = r.stream;
    j["prompt_tokens"] = r.prompt_tokens;
    j["completion_tokens"] = r.completion_tokens;
    j["cached_tokens"] = r.cached_tokens;
    if (r.ttft_ms >= 0) j["ttft_ms"] = r.ttft_ms;
    if (!r.finish_reason.empty()) j["finish_reason"] = r.finish_reason;
  }
  const std::string line = j.dump(-1, ' ', false, OrderedJson::error_handler_t::replace) + "\n";
  std::fwrite(line.data(), 1, line.size(), stderr);
}

}  // namespace m2::server
