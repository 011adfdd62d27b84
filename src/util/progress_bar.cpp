#include "util/progress_bar.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "util/log.h"

namespace m2 {
namespace {

constexpr int kBarWidth = 30;
constexpr double kGiB = 1073741824.0;

std::string amount(int64_t done, int64_t total, const ProgressUnit& unit) {
  if (unit.kind == ProgressUnit::Kind::kBytes) return fmt::format("{:.2f}/{:.2f} GiB", done / kGiB, total / kGiB);
  return unit.noun.empty() ? fmt::format("{}/{}", done, total) : fmt::format("{}/{} {}", done, total, unit.noun);
}

std::string rate(int64_t done, double elapsed_s, const ProgressUnit& unit) {
  const bool known = done > 0 && elapsed_s > 0;
  if (unit.kind == ProgressUnit::Kind::kBytes)
    return known ? fmt::format("{:.2f} GiB/s", done / kGiB / elapsed_s) : std::string("? GiB/s");
  return known ? fmt::format("{:.2f}/s", done / elapsed_s) : std::string("?/s");
}

}  // namespace

std::string format_duration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "?";
  const int64_t s = std::llround(seconds);
  if (s < 3600) return fmt::format("{}:{:02d}", s / 60, s % 60);
  return fmt::format("{}:{:02d}:{:02d}", s / 3600, s / 60 % 60, s % 60);
}

std::string render_progress(std::string_view label, int64_t done, int64_t total, double elapsed_s,
                            const ProgressUnit& unit, std::string_view extra, bool with_bar) {
  total = std::max<int64_t>(total, 0);
  done = std::clamp<int64_t>(done, 0, total);
  const double frac = total > 0 ? static_cast<double>(done) / static_cast<double>(total) : 1.0;
  const int percent = static_cast<int>(std::floor(frac * 100.0));
  std::string eta = "?";
  if (done == total) {
    eta = format_duration(0);
  } else if (done > 0 && elapsed_s > 0) {
    eta = format_duration(elapsed_s / static_cast<double>(done) * static_cast<double>(total - done));
  }
  std::string head;
  if (with_bar) {
    std::string bar(static_cast<size_t>(frac * kBarWidth), '#');
    bar.resize(kBarWidth, '.');
    head = fmt::format("{} [{}] {:3d}%", label, bar, percent);
  } else {
    head = fmt::format("{}: {}%", label, percent);
  }
  std::string line = fmt::format("{}  {}  {}  {}<{}", head, amount(done, total, unit), rate(done, elapsed_s, unit),
                                 format_duration(elapsed_s), eta);
  if (!extra.empty()) fmt::format_to(std::back_inserter(line), "  {}", extra);
  return line;
}

ProgressBar::Style ProgressBar::for_stderr(Style otherwise) {
  if (log_level() > LogLevel::kInfo) return Style::kOff;
  return isatty(STDERR_FILENO) == 1 ? Style::kTerminal : otherwise;
}

ProgressBar::ProgressBar(std::string label, int64_t total, ProgressUnit unit, Style style)
    : label_(std::move(label)), total_(std::max<int64_t>(total, 0)), unit_(std::move(unit)), style_(style),
      next_log_(std::max<int64_t>((total_ + 9) / 10, 1)), start_(std::chrono::steady_clock::now()),
      last_draw_(start_ - std::chrono::seconds(1)) {}

ProgressBar::~ProgressBar() { finish(); }

double ProgressBar::elapsed_s() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
}

void ProgressBar::update(int64_t done, std::string_view extra) {
  switch (style_) {
    case Style::kOff:
      return;
    case Style::kTerminal: {
      const auto now = std::chrono::steady_clock::now();
      if (now - last_draw_ < std::chrono::milliseconds(100) && done < total_) return;
      last_draw_ = now;
      fmt::print(stderr, "\r\033[K{}", render_progress(label_, done, total_, elapsed_s(), unit_, extra, true));
      std::fflush(stderr);
      drawn_ = true;
      return;
    }
    case Style::kLog: {
      // Lines at 10 % ... 90 %; the end is the caller's to report.
      if (done < next_log_ || done >= total_) return;
      log_info("{}", render_progress(label_, done, total_, elapsed_s(), unit_, extra, false));
      const int64_t tenths = done * 10 / std::max<int64_t>(total_, 1);
      next_log_ = ((tenths + 1) * total_ + 9) / 10;
      return;
    }
  }
}

void ProgressBar::finish() {
  if (!drawn_) return;
  fmt::print(stderr, "\r\033[K");
  std::fflush(stderr);
  drawn_ = false;
}

}  // namespace m2
