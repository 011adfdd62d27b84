#include "loadgen/pareto_plot.h"

#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <set>

#include "util/log.h"

extern char** environ;

namespace m2::loadgen {
namespace {

// The full path of `program` on the PATH, or "".
std::string find_on_path(const std::string& program) {
  const char* path = std::getenv("PATH");
  std::string_view rest = path ? path : "";
  while (!rest.empty()) {
    const size_t colon = rest.find(':');
    const std::string dir(rest.substr(0, colon));
    rest = colon == std::string_view::npos ? std::string_view() : rest.substr(colon + 1);
    const std::string candidate = (dir.empty() ? "." : dir) + "/" + program;
    if (access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return {};
}

// Runs argv[0] with the arguments and waits; true on exit status 0.
bool run_program(std::vector<std::string> args) {
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = 0;
  if (posix_spawn(&pid, argv[0], nullptr, nullptr, argv.data(), environ) != 0) return false;
  int status = 0;
  if (waitpid(pid, &status, 0) != pid) return false;
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

}  // namespace

Result<Chart> pareto_chart(const std::vector<Json>& runs) {
  Chart chart;
  chart.title = "Throughput vs interactivity";
  chart.x_title = "interactivity: tokens/s per user (1 / median TPOT)";
  chart.y_title = "output tokens/s per GPU";
  std::set<std::string> workloads;
  for (size_t i = 0; i < runs.size(); ++i) {
    const Json& run = runs[i];
    if (!run.is_object() || !run.contains("levels") || !run["levels"].is_array())
      return errorf("run {}: not a `bench serve` result (no 'levels' list)", i + 1);
    ChartSeries series;
    series.name = run.value("label", fmt::format("run {}", i + 1));
    for (const Json& level : run["levels"]) {
      const Json& s = level.value("summary", Json::object());
      if (s.value("completed", 0) <= 0) continue;
      series.points.push_back({s.value("tokens_per_s_per_user", 0.0), s.value("output_throughput_per_gpu", 0.0),
                               level.value("label", "")});
    }
    if (const Json& c = run.value("config", Json::object()); c.is_object()) {
      const std::string dataset = c.value("dataset", "");
      workloads.insert(dataset == "sharegpt" ? fmt::format("sharegpt, {}", c.value("endpoint", ""))
                                             : fmt::format("{} {}/{} tokens, {}", dataset, c.value("input_len", 0),
                                                           c.value("output_len", 0), c.value("endpoint", "")));
    }
    chart.series.push_back(std::move(series));
  }
  for (const std::string& w : workloads) chart.subtitle += (chart.subtitle.empty() ? "" : "; ") + w;
  return chart;
}

Result<std::string> write_plot(const Chart& chart, const std::string& svg_path) {
  {
    std::ofstream out(svg_path, std::ios::binary);
    if (!out) return errorf("{}: cannot write", svg_path);
    out << render_svg(chart);
    if (!out) return errorf("{}: write failed", svg_path);
  }
  const std::string converter = find_on_path("rsvg-convert");
  if (converter.empty()) return std::string();
  const size_t dot = svg_path.rfind('.');
  const size_t slash = svg_path.rfind('/');
  const bool has_ext = dot != std::string::npos && (slash == std::string::npos || dot > slash);
  const std::string png = (has_ext ? svg_path.substr(0, dot) : svg_path) + ".png";
  if (!run_program({converter, "-o", png, svg_path})) {
    log_warn("rsvg-convert could not convert {} to PNG", svg_path);
    return std::string();
  }
  return png;
}

}  // namespace m2::loadgen
