#include "cli/shutdown_signals.h"

#include <pthread.h>

#include <csignal>
#include <cstdlib>

#include "util/log.h"

namespace m2::cli {
namespace {

sigset_t shutdown_set() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  return set;
}

}  // namespace

ShutdownSignals::ShutdownSignals() {
  const sigset_t set = shutdown_set();
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  thread_ = std::thread([this] { watch(); });
}

ShutdownSignals::~ShutdownSignals() {
  // The watcher may be blocked in sigwait() for good: the process is ending.
  if (thread_.joinable()) thread_.detach();
}

void ShutdownSignals::set_ready() {
  std::lock_guard<std::mutex> lock(mu_);
  ready_ = true;
}

int ShutdownSignals::wait() {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [this] { return signal_ != 0; });
  return signal_;
}

void ShutdownSignals::watch() {
  const sigset_t set = shutdown_set();
  for (;;) {
    int sig = 0;
    if (sigwait(&set, &sig) != 0) continue;
    std::unique_lock<std::mutex> lock(mu_);
    if (!ready_) {
      log_warn("m2cpp serve: signal {} while loading: exiting", sig);
      std::_Exit(1);
    }
    if (signal_ != 0) {
      log_warn("m2cpp serve: second signal {}: exiting now, without waiting for running requests", sig);
      std::_Exit(1);
    }
    signal_ = sig;
    cv_.notify_all();
  }
}

}  // namespace m2::cli
