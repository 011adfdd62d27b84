// A clock for streams that must show signs of life while the engine has
// nothing for them (Anthropic's `ping` events while a request waits in the
// queue or its prompt is prefilled). One thread for the whole server, started
// by the first add(); each registered beat runs once per period on that
// thread until it returns false. A beat only posts work to its connection's
// strand; it never writes itself.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace m2::server {

class Heartbeat {
 public:
  explicit Heartbeat(std::chrono::milliseconds period) : period_(period) {}
  ~Heartbeat();
  Heartbeat(const Heartbeat&) = delete;
  Heartbeat& operator=(const Heartbeat&) = delete;

  // `beat` returns false when its stream needs no more beats.
  void add(std::function<bool()> beat);
  std::chrono::milliseconds period() const { return period_; }

 private:
  void run();

  const std::chrono::milliseconds period_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::function<bool()>> beats_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace m2::server
