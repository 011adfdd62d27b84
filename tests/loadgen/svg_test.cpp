// The SVG chart writer of the serving benchmark's Pareto plots: well-formed
// XML (escaped text), one marker per point, nice axis ticks, and the chart
// built from `bench serve` results.
#include <gtest/gtest.h>

#include <regex>

#include "loadgen/pareto_plot.h"
#include "loadgen/svg_chart.h"

namespace m2::loadgen {
namespace {

size_t count(const std::string& text, const std::string& needle) {
  size_t n = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
  return n;
}

void expect_ticks(double hi, int target, const std::vector<double>& want) {
  const std::vector<double> got = nice_ticks(hi, target);
  ASSERT_EQ(got.size(), want.size()) << "hi " << hi;
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-9) << "hi " << hi << " tick " << i;
}

TEST(BenchSvg, NiceTicks) {
  expect_ticks(10, 5, {0, 2, 4, 6, 8, 10});
  expect_ticks(11, 5, {0, 2, 4, 6, 8, 10, 12});
  expect_ticks(1234, 6, {0, 200, 400, 600, 800, 1000, 1200, 1400});
  expect_ticks(0.9, 4, {0, 0.2, 0.4, 0.6, 0.8, 1.0});
  expect_ticks(70, 8, {0, 10, 20, 30, 40, 50, 60, 70});
  expect_ticks(0, 5, {0, 0.2, 0.4, 0.6, 0.8, 1.0});  // nothing to plot: a unit axis
}

TEST(BenchSvg, EscapesText) {
  EXPECT_EQ(xml_escape("a<b>&\"c'\x01"), "a&lt;b&gt;&amp;&quot;c&apos;");
}

TEST(BenchSvg, OnePointPerLevelAndBalancedMarkup) {
  Chart c;
  c.title = "T <1>";
  c.x_title = "x";
  c.y_title = "y";
  c.series.push_back({"m2cpp & co", {{80, 100, "c=1"}, {50, 900, "c=16"}, {10, 3000, "c=256"}}});
  c.series.push_back({"vllm", {{90, 120, "c=1"}}});
  const std::string svg = render_svg(c);
  EXPECT_EQ(svg.rfind("<?xml", 0), 0u);
  EXPECT_EQ(count(svg, "class=\"point\""), 4u);
  EXPECT_EQ(count(svg, "data-series=\"0\""), 3u);
  EXPECT_EQ(count(svg, "<polyline"), 1u);  // a one-point series has no line
  EXPECT_NE(svg.find("m2cpp &amp; co"), std::string::npos);
  EXPECT_NE(svg.find("T &lt;1&gt;"), std::string::npos);
  EXPECT_EQ(count(svg, "<svg"), count(svg, "</svg>"));
  EXPECT_EQ(count(svg, "<g"), count(svg, "</g>"));
  EXPECT_EQ(count(svg, "<text"), count(svg, "</text>"));
  // Every marker lies inside the plot area.
  std::regex cx("cx=\"([0-9.]+)\" cy=\"([0-9.]+)\" r=\"4\"");
  for (auto it = std::sregex_iterator(svg.begin(), svg.end(), cx); it != std::sregex_iterator(); ++it) {
    EXPECT_GE(std::stod((*it)[1]), 96);
    EXPECT_LE(std::stod((*it)[1]), 900 - 32);
  }
}

TEST(BenchSvg, ParetoChartFromResults) {
  const Json run = {{"label", "ours"},
                    {"config", {{"dataset", "random"}, {"input_len", 1024}, {"output_len", 1024},
                                {"endpoint", "/v1/completions"}}},
                    {"levels", Json::array({
                                   {{"label", "c=1"}, {"summary", {{"completed", 4}, {"tokens_per_s_per_user", 50.0},
                                                                   {"output_throughput_per_gpu", 49.0}}}},
                                   {{"label", "c=4"}, {"summary", {{"completed", 0}}}},  // nothing measured
                               })}};
  auto chart = pareto_chart({run, run});
  ASSERT_TRUE(chart.ok());
  ASSERT_EQ(chart->series.size(), 2u);
  ASSERT_EQ(chart->series[0].points.size(), 1u);
  EXPECT_EQ(chart->series[0].name, "ours");
  EXPECT_EQ(chart->series[0].points[0].label, "c=1");
  EXPECT_DOUBLE_EQ(chart->series[0].points[0].x, 50.0);
  EXPECT_DOUBLE_EQ(chart->series[0].points[0].y, 49.0);
  EXPECT_EQ(chart->subtitle, "random 1024/1024 tokens, /v1/completions");
  EXPECT_FALSE(pareto_chart({Json{{"no", "levels"}}}).ok());
}

}  // namespace
}  // namespace m2::loadgen
