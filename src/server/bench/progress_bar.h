// A one-line progress bar on stderr for long benchmark runs, redrawn in
// place at most ten times a second; silent when stderr is not a terminal
// (logs and CI stay clean).
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace m2::bench {

class ProgressBar {
 public:
  ProgressBar(std::string label, int64_t total, bool enabled);
  ~ProgressBar();
  // Redraws if 100 ms have passed since the last drawing (or `force`).
  void update(int64_t done, int64_t failed, bool force = false);
  // Clears the line.
  void finish();

  // Whether stderr is a terminal.
  static bool stderr_is_terminal();

 private:
  std::string label_;
  int64_t total_;
  bool enabled_, drawn_ = false;
  std::chrono::steady_clock::time_point start_, last_;
};

}  // namespace m2::bench
