#include "util/progress_bar.h"

#include <gtest/gtest.h>

#include <string>

#include "util/log.h"

namespace m2 {
namespace {

constexpr int64_t kGiB = 1ll << 30;

TEST(ProgressRender, BytesWithBarRateEtaAndExtra) {
  EXPECT_EQ(render_progress("weights -> GPU 0", kGiB, 4 * kGiB, 2.0, ProgressUnit::bytes(), "shard 1/4", true),
            "weights -> GPU 0 [#######.......................]  25%  1.00/4.00 GiB  0.50 GiB/s  0:02<0:06  shard 1/4");
}

TEST(ProgressRender, CountsWithoutBar) {
  EXPECT_EQ(render_progress("c=4", 40, 100, 10.0, ProgressUnit::count("requests"), "", false),
            "c=4: 40%  40/100 requests  4.00/s  0:10<0:15");
}

TEST(ProgressRender, UnknownRateAndEtaBeforeAnyProgress) {
  EXPECT_EQ(render_progress("x", 0, 10 * kGiB, 0.0, ProgressUnit::bytes(), "", true),
            "x [..............................]   0%  0.00/10.00 GiB  ? GiB/s  0:00<?");
  EXPECT_EQ(render_progress("x", 0, 5, 3.0, ProgressUnit::count(""), "", false), "x: 0%  0/5  ?/s  0:03<?");
}

TEST(ProgressRender, ClampsAndFinishes) {
  EXPECT_EQ(render_progress("x", 7, 5, 90.0, ProgressUnit::count("items"), "", true),
            "x [##############################] 100%  5/5 items  0.06/s  1:30<0:00");
  EXPECT_EQ(render_progress("x", 0, 0, 1.0, ProgressUnit::count("items"), "", false), "x: 100%  0/0 items  ?/s  0:01<0:00");
  EXPECT_EQ(render_progress("x", 999, 1000, 1.0, ProgressUnit::count("items"), "", false).substr(0, 6), "x: 99%");
}

TEST(ProgressRender, Durations) {
  EXPECT_EQ(format_duration(0), "0:00");
  EXPECT_EQ(format_duration(59.6), "1:00");
  EXPECT_EQ(format_duration(754), "12:34");
  EXPECT_EQ(format_duration(3725), "1:02:05");
  EXPECT_EQ(format_duration(-1), "?");
}

TEST(ProgressBarLog, OneLineAtEachTenthBeforeTheEnd) {
  ::testing::internal::CaptureStderr();
  {
    ProgressBar bar("load", 1000, ProgressUnit::bytes(), ProgressBar::Style::kLog);
    for (int64_t done = 0; done <= 1000; done += 7) bar.update(done);
    bar.update(1000);
  }
  const std::string out = ::testing::internal::GetCapturedStderr();
  int lines = 0;
  for (char c : out) lines += c == '\n';
  EXPECT_EQ(lines, 9) << out;
  EXPECT_NE(out.find("load: 10%"), std::string::npos) << out;
  EXPECT_NE(out.find("load: 90%"), std::string::npos) << out;
  EXPECT_EQ(out.find("100%"), std::string::npos) << out;
}

TEST(ProgressBarLog, OffAndQuietPrintNothing) {
  ::testing::internal::CaptureStderr();
  {
    ProgressBar bar("load", 10, ProgressUnit::bytes(), ProgressBar::Style::kOff);
    for (int64_t done = 0; done <= 10; ++done) bar.update(done);
  }
  EXPECT_EQ(::testing::internal::GetCapturedStderr(), "");
  const LogLevel before = log_level();
  set_log_level(LogLevel::kError);
  EXPECT_EQ(ProgressBar::for_stderr(ProgressBar::Style::kLog), ProgressBar::Style::kOff);
  set_log_level(before);
}

}  // namespace
}  // namespace m2
