#include "loadgen/level_runner.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <random>
#include <thread>

#include "util/log.h"
#include "util/progress_bar.h"

namespace m2::loadgen {
namespace {

using clock = std::chrono::steady_clock;

class Level {
 public:
  Level(const RunContext& ctx, const LevelSpec& spec, const std::vector<Session>& sessions, uint64_t seed)
      : ctx_(ctx), sessions_(sessions) {
    // Arrival offsets: exponential gaps (a Poisson process), or all at once.
    std::mt19937_64 rng(seed);
    double t = 0;
    for (size_t i = 0; i < sessions.size(); ++i) {
      arrivals_.push_back(t);
      if (spec.request_rate > 0) t += std::exponential_distribution<double>(spec.request_rate)(rng);
    }
    for (const Session& s : sessions) total_requests_ += s.turns();
  }

  LevelRun run(const LevelSpec& spec) {
    LevelRun out;
    out.spec = spec;
    HttpClient metrics(ctx_.url, ctx_.api_key);
    out.cache_before = scrape_prefix_cache(metrics);
    const size_t limit = spec.concurrency > 0 ? static_cast<size_t>(spec.concurrency) : size_t{1024};
    const size_t workers = std::min(limit, sessions_.size());
    for (size_t i = 0; i < workers; ++i) clients_.push_back(std::make_unique<HttpClient>(ctx_.url, ctx_.api_key));
    ProgressBar bar(spec.label, total_requests_, ProgressUnit::count("requests"),
                    ctx_.progress ? ProgressBar::Style::kTerminal : ProgressBar::Style::kOff);
    start_ = clock::now();
    running_ = static_cast<int>(workers);
    std::vector<std::thread> threads;
    for (size_t i = 0; i < workers; ++i) threads.emplace_back([this, i] { work(*clients_[i]); });
    {
      std::unique_lock<std::mutex> lock(mu_);
      while (running_ > 0) {
        done_cv_.wait_for(lock, std::chrono::milliseconds(100));
        if (ctx_.stop->load() && !out.interrupted) {
          out.interrupted = true;
          for (auto& c : clients_) c->interrupt();
        }
        bar.update(done_, failed_ > 0 ? fmt::format("{} failed", failed_) : std::string());
      }
    }
    for (auto& t : threads) t.join();
    bar.finish();
    out.interrupted = out.interrupted || ctx_.stop->load();
    if (!out.interrupted) out.cache_after = scrape_prefix_cache(metrics);
    std::sort(samples_.begin(), samples_.end(),
              [](const RequestSample& a, const RequestSample& b) { return a.start_s < b.start_s; });
    for (size_t i = 0; i < samples_.size(); ++i) {
      samples_[i].id = static_cast<int64_t>(i);
      out.duration_s = std::max(out.duration_s, samples_[i].start_s + samples_[i].e2e_s);
    }
    out.samples = std::move(samples_);
    return out;
  }

 private:
  bool stopping() const { return ctx_.stop->load(); }

  void work(HttpClient& client) {
    for (;;) {
      const size_t i = next_.fetch_add(1);
      if (i >= sessions_.size() || !wait_arrival(arrivals_[i]) || !run_session(client, static_cast<int>(i))) break;
    }
    std::lock_guard<std::mutex> lock(mu_);
    --running_;
    done_cv_.notify_all();
  }

  // Sleeps until the arrival time; false if stopped meanwhile.
  bool wait_arrival(double offset_s) {
    const auto due = start_ + std::chrono::duration_cast<clock::duration>(std::chrono::duration<double>(offset_s));
    while (!stopping() && clock::now() < due)
      std::this_thread::sleep_for(std::min<clock::duration>(due - clock::now(), std::chrono::milliseconds(50)));
    return !stopping();
  }

  // Runs every turn of a session; false once stopped.
  bool run_session(HttpClient& client, int index) {
    const Session& s = sessions_[static_cast<size_t>(index)];
    Json input = s.first_input;
    int64_t len = s.first_len;
    for (int turn = 0; turn < s.turns(); ++turn) {
      RequestSample sample = send_request(client, ctx_.request, input, s.output_len, start_);
      if (stopping() && !sample.success) return false;  // interrupted: not a measurement
      sample.prompt_len = len;
      if (s.turns() > 1) {
        sample.session = index;
        sample.turn = turn;
      }
      const bool ok = sample.success;
      std::string reply = std::move(sample.reply_content), reasoning = std::move(sample.reply_reasoning);
      record(std::move(sample));
      if (!ok || turn + 1 == s.turns()) break;
      auto added = extend_history(s, turn, reply, reasoning, ctx_.request.endpoint, *ctx_.tokens, &input);
      if (!added.ok()) {
        log_warn("session {}: cannot build turn {}: {}", index, turn + 1, added.status().message());
        break;
      }
      len += *added;
    }
    return !stopping();
  }

  void record(RequestSample s) {
    std::lock_guard<std::mutex> lock(mu_);
    ++done_;
    if (!s.success) ++failed_;
    samples_.push_back(std::move(s));
  }

  const RunContext& ctx_;
  const std::vector<Session>& sessions_;
  std::vector<double> arrivals_;
  int64_t total_requests_ = 0;
  std::vector<std::unique_ptr<HttpClient>> clients_;
  clock::time_point start_;
  std::atomic<size_t> next_{0};
  std::mutex mu_;
  std::condition_variable done_cv_;
  int running_ = 0;
  int64_t done_ = 0, failed_ = 0;
  std::vector<RequestSample> samples_;
};

}  // namespace

LevelRun run_level(const RunContext& ctx, const LevelSpec& spec, const std::vector<Session>& sessions,
                   uint64_t seed) {
  Level level(ctx, spec, sessions, seed);
  return level.run(spec);
}

}  // namespace m2::loadgen
