// `m2cpp bench plot a.json b.json ... --out plot.svg`: the Pareto plot of
// several `bench serve` runs (engines, configurations) on one chart.
#include "cli/bench_plot.h"

#include "loadgen/pareto_plot.h"
#include "util/log.h"

namespace m2::cli {
namespace {

struct Args {
  std::vector<std::string> files;
  std::vector<std::string> labels;
  std::string out = "pareto.svg";
  std::string title;
};

int run(const Args& a) {
  std::vector<Json> runs;
  for (size_t i = 0; i < a.files.size(); ++i) {
    auto j = read_json_file(a.files[i]);
    if (!j.ok()) return log_error("{}", j.status().message()), 1;
    if (i < a.labels.size()) (*j)["label"] = a.labels[i];
    runs.push_back(std::move(*j));
  }
  auto chart = loadgen::pareto_chart(runs);
  if (!chart.ok()) return log_error("{}", chart.status().message()), 1;
  if (!a.title.empty()) chart->title = a.title;
  auto png = loadgen::write_plot(*chart, a.out);
  if (!png.ok()) return log_error("{}", png.status().message()), 1;
  fmt::print("plot {}{}\n", a.out, png->empty() ? "" : ", " + *png);
  return 0;
}

}  // namespace

std::function<int()> add_bench_plot(CLI::App* bench, CLI::App** sub) {
  auto* app = bench->add_subcommand("plot", "Overlay `bench serve` results on one throughput-interactivity plot");
  auto a = std::make_shared<Args>();
  app->add_option("results", a->files, "JSON files written by `bench serve`")->required()->check(CLI::ExistingFile);
  app->add_option("--out", a->out, "SVG to write (and a PNG beside it when rsvg-convert is installed)")
      ->capture_default_str();
  app->add_option("--labels", a->labels, "Curve names, in file order (default: each run's label)")->delimiter(',');
  app->add_option("--title", a->title, "Chart title");
  *sub = app;
  return [a] { return run(*a); };
}

}  // namespace m2::cli
