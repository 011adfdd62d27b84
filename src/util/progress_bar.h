// Progress of a long operation (a checkpoint upload, a benchmark level) on
// stderr: a bar redrawn in place at most ten times a second when stderr is a
// terminal, else a log line at every 10 % (or nothing), so that logs and CI
// output stay line-oriented. The text of a line is a pure function of the
// counts and the elapsed time (render_progress), tested without a terminal.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

namespace m2 {

// What is counted: items shown with a noun ("12/100 requests  3.10/s"), or
// bytes shown in GiB ("1.20/4.50 GiB  2.10 GiB/s").
struct ProgressUnit {
  enum class Kind { kCount, kBytes } kind = Kind::kCount;
  std::string noun;  // kCount only

  static ProgressUnit bytes() { return {Kind::kBytes, {}}; }
  static ProgressUnit count(std::string noun) { return {Kind::kCount, std::move(noun)}; }
};

// "label [#####.........]  42%  1.20/4.50 GiB  2.10 GiB/s  0:03<0:04  extra"
// (without the bracketed bar and with "label:" when `with_bar` is false).
// done is clamped to [0, total]; the rate and the remaining time need some
// progress and elapsed time, and show "?" until then.
std::string render_progress(std::string_view label, int64_t done, int64_t total, double elapsed_s,
                            const ProgressUnit& unit, std::string_view extra, bool with_bar);

// "0:07", "12:03", "1:02:03".
std::string format_duration(double seconds);

class ProgressBar {
 public:
  enum class Style {
    kOff,
    kTerminal,  // one line redrawn in place, cleared by finish()
    kLog,       // a log_info line whenever another 10 % is done
  };
  // kTerminal when stderr is a terminal, else `otherwise`; kOff when the log
  // level hides info lines (--quiet).
  static Style for_stderr(Style otherwise);

  ProgressBar(std::string label, int64_t total, ProgressUnit unit, Style style);
  ~ProgressBar();
  ProgressBar(const ProgressBar&) = delete;
  ProgressBar& operator=(const ProgressBar&) = delete;

  // Shows `done` of the total, with `extra` at the end of the line.
  void update(int64_t done, std::string_view extra = {});
  // Clears a terminal line (the caller logs its own summary).
  void finish();
  double elapsed_s() const;

 private:
  std::string label_;
  int64_t total_;
  ProgressUnit unit_;
  Style style_;
  bool drawn_ = false;
  int64_t next_log_ = 0;  // kLog: done at which the next line is due
  std::chrono::steady_clock::time_point start_, last_draw_;
};

}  // namespace m2
