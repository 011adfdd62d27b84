#include "server/heartbeat.h"

namespace m2::server {

Heartbeat::~Heartbeat() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void Heartbeat::add(std::function<bool()> beat) {
  std::lock_guard<std::mutex> lock(mu_);
  beats_.push_back(std::move(beat));
  if (!thread_.joinable()) thread_ = std::thread([this] { run(); });
}

void Heartbeat::run() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stopping_) {
    if (cv_.wait_for(lock, period_, [this] { return stopping_; })) break;
    std::vector<std::function<bool()>> beats;
    beats.swap(beats_);
    lock.unlock();  // beats added meanwhile wait for the next period
    std::vector<std::function<bool()>> alive;
    for (auto& beat : beats)
      if (beat()) alive.push_back(std::move(beat));
    lock.lock();
    for (auto& beat : alive) beats_.push_back(std::move(beat));
  }
}

}  // namespace m2::server
