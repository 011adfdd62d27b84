// One HTTP request's generation: its engine requests (one per prompt of a
// /v1/completions batch, else one; each may have n completions), their
// outputs brought back to the connection's strand, cancellation when the
// client goes away, and the metrics and access log at the end. The API
// classes derive from it and turn outputs into their response format.
//
// Threading: a Generation is built on a request thread (server.cpp's work
// queue) and from start() on everything of it runs on its connection's
// strand. The engine thread only posts outputs there (the sink never blocks).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "server/api_error.h"
#include "server/http_server.h"
#include "server/server_context.h"

namespace m2::server {

struct EngineJob {
  std::vector<int32_t> prompt;
  SamplingParams params;
};

class Generation : public std::enable_shared_from_this<Generation> {
 public:
  using Clock = std::chrono::steady_clock;

  Generation(ServerContext& ctx, std::shared_ptr<ResponseWriter> writer, const HttpRequest& request,
             ApiFlavor flavor, std::string id, bool stream);
  virtual ~Generation() = default;

  // From any thread: submits every job, on the strand. When the engine
  // refuses (waiting queue full, shutting down), answers 429 / 503 itself.
  void start(std::vector<EngineJob> jobs);

 protected:
  // All on the strand.
  virtual void on_admitted() {}
  virtual void on_output(size_t job, RequestOutput& output) = 0;
  virtual void on_complete() = 0;                    // every completion of every job finished
  virtual void on_error(const ApiError& error) = 0;  // the engine failed it; nothing more follows

  // Subclasses call this once they have sent the whole response.
  void log_done(int status, const std::string& finish_reason);
  // Answers an error as a whole response (before anything was streamed).
  void respond_error(const ApiError& error);
  // Answers the whole (non-streamed) response, 200, and logs it.
  void respond_json(const OrderedJson& body, const std::string& finish_reason);

  ServerContext& ctx_;
  std::shared_ptr<ResponseWriter> writer_;
  const ApiFlavor flavor_;
  const std::string id_;
  const bool stream_;
  const int64_t created_;  // unix seconds
  int64_t prompt_tokens_ = 0, output_tokens_ = 0, cached_tokens_ = 0;

 private:
  void start_on_strand(std::vector<EngineJob> jobs);
  void deliver(size_t job, const Status& error, std::vector<RequestOutput>& outputs, Clock::time_point at);
  void abort_all();
  // Backpressure: the client reads slower than the engine generates. Its
  // sequences stop being scheduled (and go on when it catches up), so its
  // output waits in the engine's KV cache, not in the server's memory.
  void pause_all(bool paused);
  // Tokens are counted as the engine produces them (as vLLM counts them), so
  // that a request cancelled by its client's disconnect still shows what it
  // cost in the metrics and the access log.
  void count_tokens(size_t job, const std::vector<RequestOutput>& outputs);

  std::string route_, method_, remote_, request_id_;
  Clock::time_point start_;
  Clock::time_point first_token_{}, last_token_{};
  bool have_token_ = false;
  std::vector<std::string> job_ids_;
  std::vector<int> remaining_;  // completions not finished, per job
  std::vector<bool> prompt_counted_;  // per job
  size_t jobs_left_ = 0;
  bool failed_ = false, logged_ = false;
};

// vLLM's `stop_reason`: the stop string, or the stop token id, or null (EOS,
// length).
OrderedJson stop_reason_json(const RequestOutput& o);

}  // namespace m2::server
