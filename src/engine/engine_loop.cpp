#include "engine/engine_loop.h"

#include <map>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include "util/log.h"

namespace m2 {

EngineLoop::EngineLoop(Engine& engine, size_t max_waiting, std::chrono::microseconds step_delay)
    : engine_(engine), max_waiting_(max_waiting), step_delay_(step_delay) {
  last_stats_ = engine_.stats();
}

EngineLoop::~EngineLoop() { stop(errorf("the engine stopped")); }

void EngineLoop::start() {
  std::lock_guard<std::mutex> lock(mu_);
  if (running_ || stop_) return;
  running_ = true;
  thread_ = std::thread([this] { run(); });
}

void EngineLoop::stop(const Status& reason) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!running_) return;
    stop_ = true;
    cancel_ = true;
    cancel_reason_ = reason;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  std::lock_guard<std::mutex> lock(mu_);
  running_ = false;
}

Admission EngineLoop::submit(LoopRequest request) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stop_ || !running_) return Admission::kStopped;
    // Waiting = not yet running: queued here, or waiting in the scheduler.
    if (max_waiting_ > 0 && inbox_.size() + last_stats_.waiting >= max_waiting_) return Admission::kQueueFull;
    inbox_.push_back(std::move(request));
    ++live_count_;
  }
  cv_.notify_one();
  return Admission::kAccepted;
}

void EngineLoop::abort(const std::string& request_id) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    aborts_.push_back(request_id);
  }
  cv_.notify_one();
}

void EngineLoop::set_paused(const std::string& request_id, bool paused) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    pauses_.emplace_back(request_id, paused);
  }
  cv_.notify_one();
}

void EngineLoop::cancel_all(const Status& reason) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    cancel_ = true;
    cancel_reason_ = reason;
  }
  cv_.notify_one();
}

void EngineLoop::pause(PauseMode mode, std::function<void(size_t)> done) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    hold_ = true;
    if (mode != PauseMode::kWait) no_step_ = true;
  }
  post([this, mode, done = std::move(done)](Engine& engine) {
    // What the pause did is in stats() before its caller hears of it.
    auto refreshed = [&](size_t n) {
      {
        std::lock_guard<std::mutex> lock(mu_);
        last_stats_ = engine.stats();
      }
      done(n);
    };
    switch (mode) {
      case PauseMode::kAbort: return refreshed(abort_in_flight());
      case PauseMode::kRetract: engine.retract_all(); return refreshed(live_.size());
      case PauseMode::kInPlace: return done(live_.size());
      case PauseMode::kWait: {
        std::unique_lock<std::mutex> lock(mu_);
        if (live_.empty()) {
          no_step_ = true;
          lock.unlock();
          return done(0);
        }
        // Called when live_ empties (run()), with the number waited for.
        wait_done_.push_back([done = std::move(done), n = live_.size()] { done(n); });
        return;
      }
    }
  });
}

bool EngineLoop::resume() {
  bool was = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    was = hold_;
    hold_ = false;
    no_step_ = false;
  }
  cv_.notify_one();
  return was;
}

bool EngineLoop::paused() const {
  std::lock_guard<std::mutex> lock(mu_);
  return hold_;
}

void EngineLoop::post(std::function<void(Engine&)> fn) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    controls_.push_back(std::move(fn));
  }
  cv_.notify_one();
}

size_t EngineLoop::abort_in_flight() {
  const size_t n = live_.size();
  for (auto& [id, live] : live_) {
    std::vector<RequestOutput> outs = engine_.abort_with_outputs(id);
    live.sink(Status(), std::move(outs));
  }
  live_.clear();
  return n;
}

EngineLoopStats EngineLoop::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  EngineLoopStats s;
  s.engine = last_stats_;
  s.queued = inbox_.size();
  s.unfinished = live_count_;
  return s;
}

size_t EngineLoop::num_unfinished() const {
  std::lock_guard<std::mutex> lock(mu_);
  return live_count_;
}

bool EngineLoop::wait_idle(std::chrono::milliseconds timeout) const {
  std::unique_lock<std::mutex> lock(mu_);
  return idle_cv_.wait_for(lock, timeout, [this] { return live_count_ == 0; });
}

void EngineLoop::admit(std::vector<LoopRequest>& batch) {
  for (LoopRequest& r : batch) {
    Status s = live_.count(r.id) ? errorf("request id '{}' is already in use", r.id)
                                 : engine_.add_request(r.id, std::move(r.prompt), r.params, r.priority);
    if (!s.ok()) {
      r.sink(s, {});
      continue;
    }
    live_[r.id] = Live{std::move(r.sink), r.params.n};
  }
}

void EngineLoop::fail_all(const Status& error) {
  for (auto& [id, live] : live_) {
    engine_.abort(id);
    live.sink(error, {});
  }
  live_.clear();
}

namespace {

// glibc keeps the freed heap of a burst of requests (theirs and their
// connections') mapped; returning it once the server has been idle a moment
// brings the RSS back to where it was.
void release_free_heap() {
#if defined(__GLIBC__)
  malloc_trim(0);
#endif
}

}  // namespace

void EngineLoop::run() {
  bool trim_pending = false;  // the last request finished; the heap was not trimmed since
  for (;;) {
    std::vector<LoopRequest> batch;
    std::vector<std::string> aborts;
    std::vector<std::pair<std::string, bool>> pauses;
    std::vector<std::function<void(Engine&)>> controls;
    bool cancel = false, stop = false, no_step = false;
    Status cancel_reason;
    {
      std::unique_lock<std::mutex> lock(mu_);
      // The engine is only touched by this thread: asking it here is safe.
      auto has_work = [&] {
        return stop_ || cancel_ || (!inbox_.empty() && !hold_) || !aborts_.empty() || !pauses_.empty() ||
               !controls_.empty() || (!live_.empty() && engine_.has_runnable() && !no_step_);
      };
      if (trim_pending && !cv_.wait_for(lock, std::chrono::milliseconds(500), has_work)) {
        lock.unlock();
        release_free_heap();
        lock.lock();
      }
      trim_pending = false;
      cv_.wait(lock, has_work);
      if (!hold_ || cancel_ || stop_) batch.swap(inbox_);  // held while paused
      aborts.swap(aborts_);
      pauses.swap(pauses_);
      controls.swap(controls_);
      no_step = no_step_;
      cancel = cancel_;
      cancel_ = false;
      cancel_reason = cancel_reason_;
      stop = stop_;
    }
    // Admissions first, so that an abort sent right after its submission
    // (in the same wake-up) finds the request.
    admit(batch);
    for (const std::string& id : aborts) {
      if (live_.erase(id)) engine_.abort(id);
    }
    for (const auto& [id, paused] : pauses) engine_.set_paused(id, paused);
    if (cancel) fail_all(cancel_reason);
    if (!stop) {
      for (auto& fn : controls) fn(engine_);
    }

    if (!live_.empty() && engine_.has_runnable() && !no_step) {
      auto outputs = engine_.step();
      if (!outputs.ok()) {
        log_error("engine step failed: {}", outputs.status().message());
        fail_all(outputs.status());
      } else {
        // Group by request: one sink call per request and step.
        std::map<std::string, std::vector<RequestOutput>> by_request;
        for (RequestOutput& o : *outputs) by_request[o.request_id].push_back(std::move(o));
        for (auto& [id, outs] : by_request) {
          auto it = live_.find(id);
          if (it == live_.end()) continue;
          for (const RequestOutput& o : outs) it->second.remaining -= o.finished ? 1 : 0;
          const bool done = it->second.remaining <= 0;
          OutputSink sink = done ? std::move(it->second.sink) : it->second.sink;
          if (done) live_.erase(it);
          sink(Status(), std::move(outs));
        }
      }
    }
    std::vector<std::function<void()>> waited;
    {
      std::unique_lock<std::mutex> lock(mu_);
      if (!wait_done_.empty() && (live_.empty() || !hold_)) {
        // A kWait pause holds once nothing is in flight (or ended by resume).
        waited.swap(wait_done_);
        if (hold_) no_step_ = true;
      }
      last_stats_ = engine_.stats();
      if (live_count_ > 0 && live_.empty() && inbox_.empty()) trim_pending = true;
      live_count_ = live_.size() + inbox_.size();
      if (live_count_ == 0) idle_cv_.notify_all();
      if (step_delay_.count() > 0 && !live_.empty() && engine_.has_runnable() && !stop) {
        cv_.wait_for(lock, step_delay_, [this] { return stop_ || cancel_; });
      }
    }
    for (auto& done : waited) done();
    if (stop) return;
  }
}

}  // namespace m2
