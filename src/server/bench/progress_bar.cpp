#include "server/bench/progress_bar.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>

namespace m2::bench {

ProgressBar::ProgressBar(std::string label, int64_t total, bool enabled)
    : label_(std::move(label)), total_(std::max<int64_t>(total, 1)), enabled_(enabled),
      start_(std::chrono::steady_clock::now()), last_(start_ - std::chrono::seconds(1)) {}

ProgressBar::~ProgressBar() { finish(); }

bool ProgressBar::stderr_is_terminal() { return isatty(STDERR_FILENO) == 1; }

void ProgressBar::update(int64_t done, int64_t failed, bool force) {
  if (!enabled_) return;
  const auto now = std::chrono::steady_clock::now();
  if (!force && now - last_ < std::chrono::milliseconds(100)) return;
  last_ = now;
  const double elapsed = std::chrono::duration<double>(now - start_).count();
  const double frac = std::clamp(static_cast<double>(done) / static_cast<double>(total_), 0.0, 1.0);
  constexpr int kWidth = 30;
  const int filled = static_cast<int>(frac * kWidth);
  std::string bar(static_cast<size_t>(filled), '#');
  bar.resize(kWidth, '.');
  std::string eta = "--";
  if (done > 0 && done < total_) eta = fmt::format("{:.0f} s", elapsed / static_cast<double>(done) * (total_ - done));
  std::string errors = failed > 0 ? fmt::format("  {} failed", failed) : std::string();
  fmt::print(stderr, "\r\033[K{} [{}] {}/{} requests  {:.1f} s  eta {}{}", label_, bar, done, total_, elapsed, eta,
             errors);
  std::fflush(stderr);
  drawn_ = true;
}

void ProgressBar::finish() {
  if (!drawn_) return;
  fmt::print(stderr, "\r\033[K");
  std::fflush(stderr);
  drawn_ = false;
}

}  // namespace m2::bench
