// The throughput-interactivity Pareto plot of one or more `bench serve`
// runs: x = tokens/s per user (1 / median TPOT), y = output tokens/s per
// GPU, one point per level (labelled "c=16"), one curve per run (legend =
// the run's label), so runs of several engines overlay on one chart. Written
// as SVG, and as PNG too when `rsvg-convert` (librsvg2-bin) is on the PATH.
#pragma once

#include <string>
#include <vector>

#include "loadgen/svg_chart.h"
#include "util/json.h"

namespace m2::loadgen {

// Runs are the JSON documents `bench serve` writes; levels that completed
// no request are left out.
Result<Chart> pareto_chart(const std::vector<Json>& runs);

// Writes `svg_path`, and the PNG beside it (same name, .png) when a
// converter is present; returns the PNG's path, or "" when none was made.
Result<std::string> write_plot(const Chart& chart, const std::string& svg_path);

}  // namespace m2::loadgen
