// A small SVG line-chart writer (no dependency): linear axes from zero with
// "nice" ticks (1, 2, 5 x 10^k), grid, axis titles, one polyline per series
// with a labelled marker per point, and a legend. Each marker is a
// <circle class="point"> carrying data-series / data-label attributes, so
// tests and scripts can read the plotted points back from the file.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace m2::loadgen {

struct ChartPoint {
  double x = 0, y = 0;
  std::string label;  // drawn beside the marker (e.g. "c=16")
};

struct ChartSeries {
  std::string name;  // legend entry
  std::vector<ChartPoint> points;  // joined in this order
};

struct Chart {
  std::string title, subtitle, x_title, y_title;
  std::vector<ChartSeries> series;
};

// The whole SVG document.
std::string render_svg(const Chart& chart);

// Ticks 0, step, 2 step, ... up to the first multiple of step >= hi, with
// about `target` intervals; step is 1, 2 or 5 times a power of ten (hi <= 0
// counts as 1).
std::vector<double> nice_ticks(double hi, int target);

std::string xml_escape(std::string_view text);

}  // namespace m2::loadgen
