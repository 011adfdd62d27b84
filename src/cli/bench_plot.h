// `m2cpp bench plot`: overlays `bench serve` results on one Pareto plot.
#pragma once

#include <CLI/CLI.hpp>

#include <functional>

namespace m2::cli {

// Adds the subcommand to `bench`; returns the function that runs it.
std::function<int()> add_bench_plot(CLI::App* bench, CLI::App** sub);

}  // namespace m2::cli
