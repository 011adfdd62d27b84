// SIGINT and SIGTERM of `m2cpp serve`, taken by one watcher thread so that
// no other thread is ever interrupted by them:
//  - before the server is ready (loading), the first exits at once: there is
//    nothing to drain, and a load can take minutes;
//  - once ready, the first starts the graceful shutdown (wait() returns);
//  - a second one exits at once, whatever the drain is waiting for.
// Construct it before any other thread starts, so that every thread inherits
// the blocked mask.
#pragma once

#include <condition_variable>
#include <mutex>
#include <thread>

namespace m2::cli {

class ShutdownSignals {
 public:
  ShutdownSignals();
  ~ShutdownSignals();
  ShutdownSignals(const ShutdownSignals&) = delete;
  ShutdownSignals& operator=(const ShutdownSignals&) = delete;

  // From here on, a first signal asks for a graceful shutdown.
  void set_ready();
  // Blocks until the first signal after set_ready(); returns its number.
  int wait();

 private:
  void watch();

  std::mutex mu_;
  std::condition_variable cv_;
  bool ready_ = false;
  int signal_ = 0;
  std::thread thread_;
};

}  // namespace m2::cli
