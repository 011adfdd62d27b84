// The engine on its own thread: requests come in through a queue from any
// thread, one thread runs Engine::step() in a loop, and each step's outputs
// go to the sink of their request. The loop never waits on a consumer: a
// sink must return at once (the server's posts the outputs to the
// connection's strand), so a slow client cannot slow the other requests.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "engine/engine.h"

namespace m2 {

// Called on the engine thread with each step's outputs of one request (one
// entry per completion index that produced something), or once with an
// error (the request was refused by the engine, failed, or was cancelled by
// shutdown) and no outputs, after which it is not called again. It is also
// not called again after the request's last completion finished.
using OutputSink = std::function<void(const Status& error, std::vector<RequestOutput>&& outputs)>;

struct LoopRequest {
  std::string id;
  std::vector<int32_t> prompt;
  SamplingParams params;
  int priority = 0;
  OutputSink sink;
};

enum class Admission { kAccepted, kQueueFull, kStopped };

// What a pause does with the requests in flight (SGLang's pause_generation
// modes, plus kWait). In every mode new requests are accepted and held (not
// started) until resume().
enum class PauseMode {
  kAbort,    // end them now, finished with reason "abort" (their tokens so far returned)
  kWait,     // let them finish; the pause holds once none is left
  kInPlace,  // stop stepping; they keep their KV blocks and go on at resume
  kRetract,  // stop stepping and preempt them (KV freed); they recompute at resume
};

struct EngineLoopStats {
  EngineStats engine;       // as of the last step
  size_t queued = 0;        // submitted, not yet handed to the engine
  size_t unfinished = 0;    // requests with a live sink
};

class EngineLoop {
 public:
  // `max_waiting`: requests that may wait for a running slot (queued here or
  // waiting in the scheduler) before submit() answers kQueueFull; 0: no limit.
  // `step_delay` (tests only) pauses after every step, so that a tiny model
  // generates slowly enough for tests of queueing, cancellation and shutdown.
  EngineLoop(Engine& engine, size_t max_waiting,
             std::chrono::microseconds step_delay = std::chrono::microseconds(0));
  ~EngineLoop();
  EngineLoop(const EngineLoop&) = delete;
  EngineLoop& operator=(const EngineLoop&) = delete;

  void start();
  // Ends every unfinished request (its sink gets `reason`) and joins the thread.
  void stop(const Status& reason);

  // Thread-safe. The request id must be unique among live requests.
  Admission submit(LoopRequest request);
  // Thread-safe. Frees the request's KV blocks before the next step; its sink
  // is dropped without being called.
  void abort(const std::string& request_id);
  // Thread-safe. Pauses (resumes) the request before the next step: its
  // sequences are not scheduled and keep their KV blocks (the server's
  // backpressure for a client that stops reading). A loop whose requests
  // are all paused sleeps until something arrives.
  void set_paused(const std::string& request_id, bool paused);
  // Thread-safe: every unfinished request's sink gets `reason`, and the
  // request is aborted (graceful shutdown past its grace period).
  void cancel_all(const Status& reason);

  // ---- Rollout control (docs/rollout.md). Thread-safe.
  // Pauses generation; `done` is called on the engine thread once the pause
  // holds, with the number of requests it acted on (aborted, waited for,
  // kept or retracted). A second pause changes the mode.
  void pause(PauseMode mode, std::function<void(size_t)> done);
  // Ends a pause: held requests start, kept ones go on. False if not paused.
  bool resume();
  bool paused() const;
  // Runs `fn` on the engine thread between two steps (also while paused),
  // in call order. Nothing runs after stop().
  void post(std::function<void(Engine&)> fn);

  EngineLoopStats stats() const;
  size_t num_unfinished() const;
  // Blocks until no request is unfinished or `timeout` passes; true if idle.
  bool wait_idle(std::chrono::milliseconds timeout) const;

 private:
  struct Live {
    OutputSink sink;
    int remaining;  // completions not finished yet
  };

  void run();
  void admit(std::vector<LoopRequest>& batch);
  void fail_all(const Status& error);
  size_t abort_in_flight();  // kAbort: every live request ends with reason abort

  Engine& engine_;
  const size_t max_waiting_;
  const std::chrono::microseconds step_delay_;

  mutable std::mutex mu_;
  mutable std::condition_variable cv_;       // wakes the loop
  mutable std::condition_variable idle_cv_;  // wakes wait_idle
  std::vector<LoopRequest> inbox_;
  std::vector<std::string> aborts_;
  std::vector<std::pair<std::string, bool>> pauses_;  // (request id, paused), in call order
  std::vector<std::function<void(Engine&)>> controls_;
  bool hold_ = false;     // paused: the inbox is not admitted
  bool no_step_ = false;  // paused (and, for kWait, nothing left in flight): no step runs
  std::vector<std::function<void()>> wait_done_;  // kWait pauses waiting for live_ to empty
  Status cancel_reason_;
  bool cancel_ = false;
  bool stop_ = false;
  bool running_ = false;
  EngineStats last_stats_;
  size_t live_count_ = 0;  // live_.size() plus inbox_, for readers on other threads

  // Engine thread only.
  std::unordered_map<std::string, Live> live_;
  std::thread thread_;
};

}  // namespace m2
