#include "loadgen/svg_chart.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace m2::loadgen {
namespace {

constexpr double kWidth = 900, kPlotHeight = 430;
constexpr double kLeft = 96, kRight = 32, kTop = 78, kLegendRow = 18;
constexpr const char* kColors[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd",
                                   "#8c564b", "#e377c2", "#17becf", "#7f7f7f", "#bcbd22"};

double tick_step(double hi, int target) {
  const double raw = hi / std::max(target, 1);
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  const double norm = raw / mag;
  return (norm < 1.5 ? 1 : norm < 3 ? 2 : norm < 7 ? 5 : 10) * mag;
}

std::string tick_label(double v, double step) {
  const int decimals = std::max(0, -static_cast<int>(std::floor(std::log10(step) + 1e-9)));
  return fmt::format("{:.{}f}", v, decimals);
}

}  // namespace

std::vector<double> nice_ticks(double hi, int target) {
  if (!(hi > 0) || !std::isfinite(hi)) hi = 1;
  const double step = tick_step(hi, target);
  const int n = static_cast<int>(std::ceil(hi / step - 1e-9));
  std::vector<double> ticks;
  for (int i = 0; i <= std::max(n, 1); ++i) ticks.push_back(i * step);
  return ticks;
}

std::string xml_escape(std::string_view text) {
  std::string out;
  for (const char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&apos;"; break;
      default:
        // Control characters other than tab/newline are not allowed in XML 1.0.
        if (static_cast<unsigned char>(c) >= 0x20 || c == '\t' || c == '\n') out += c;
    }
  }
  return out;
}

std::string render_svg(const Chart& chart) {
  double max_x = 0, max_y = 0;
  for (const ChartSeries& s : chart.series)
    for (const ChartPoint& p : s.points) {
      if (std::isfinite(p.x)) max_x = std::max(max_x, p.x);
      if (std::isfinite(p.y)) max_y = std::max(max_y, p.y);
    }
  const std::vector<double> xt = nice_ticks(max_x * 1.05, 8), yt = nice_ticks(max_y * 1.08, 6);
  const double x_hi = xt.back(), y_hi = yt.back();
  const double pw = kWidth - kLeft - kRight, ph = kPlotHeight;
  // Below the plot: tick labels, the x title, then the legend (one row per series).
  const double legend_y = kTop + ph + 64;
  const double height = legend_y + kLegendRow * static_cast<double>(chart.series.size()) + 12;
  auto sx = [&](double x) { return kLeft + pw * std::clamp(x / x_hi, 0.0, 1.0); };
  auto sy = [&](double y) { return kTop + ph * (1 - std::clamp(y / y_hi, 0.0, 1.0)); };

  std::string o = fmt::format(
      "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0}\" height=\"{1}\" viewBox=\"0 0 {0} {1}\" "
      "font-family=\"Helvetica, Arial, sans-serif\">\n"
      "<title>{2}</title>\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
      "<text x=\"{3}\" y=\"30\" font-size=\"18\" font-weight=\"bold\">{2}</text>\n"
      "<text x=\"{3}\" y=\"52\" font-size=\"12\" fill=\"#555\">{4}</text>\n",
      kWidth, height, xml_escape(chart.title), kLeft, xml_escape(chart.subtitle));
  // Grid and ticks.
  o += "<g font-size=\"11\" fill=\"#333\">\n";
  for (double t : xt) {
    o += fmt::format("<line x1=\"{0:.1f}\" y1=\"{1:.1f}\" x2=\"{0:.1f}\" y2=\"{2:.1f}\" stroke=\"#e5e5e5\"/>"
                     "<text x=\"{0:.1f}\" y=\"{3:.1f}\" text-anchor=\"middle\">{4}</text>\n",
                     sx(t), kTop, kTop + ph, kTop + ph + 16, tick_label(t, xt[1] - xt[0]));
  }
  for (double t : yt) {
    o += fmt::format("<line x1=\"{0:.1f}\" y1=\"{1:.1f}\" x2=\"{2:.1f}\" y2=\"{1:.1f}\" stroke=\"#e5e5e5\"/>"
                     "<text x=\"{3:.1f}\" y=\"{4:.1f}\" text-anchor=\"end\">{5}</text>\n",
                     kLeft, sy(t), kLeft + pw, kLeft - 6, sy(t) + 4, tick_label(t, yt[1] - yt[0]));
  }
  o += "</g>\n";
  o += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"none\" stroke=\"#333\"/>\n", kLeft,
                   kTop, pw, ph);
  o += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" font-size=\"13\" text-anchor=\"middle\">{}</text>\n",
                   kLeft + pw / 2, kTop + ph + 40, xml_escape(chart.x_title));
  o += fmt::format("<text transform=\"translate(24 {:.1f}) rotate(-90)\" font-size=\"13\" "
                   "text-anchor=\"middle\">{}</text>\n",
                   kTop + ph / 2, xml_escape(chart.y_title));
  // Series: line, markers, point labels.
  for (size_t i = 0; i < chart.series.size(); ++i) {
    const ChartSeries& s = chart.series[i];
    const char* color = kColors[i % std::size(kColors)];
    o += fmt::format("<g class=\"series\" data-name=\"{}\">\n", xml_escape(s.name));
    std::string pts;
    for (const ChartPoint& p : s.points) pts += fmt::format("{:.1f},{:.1f} ", sx(p.x), sy(p.y));
    if (s.points.size() > 1)
      o += fmt::format("<polyline points=\"{}\" fill=\"none\" stroke=\"{}\" stroke-width=\"2\"/>\n", pts, color);
    for (size_t k = 0; k < s.points.size(); ++k) {
      const ChartPoint& p = s.points[k];
      o += fmt::format("<circle class=\"point\" data-series=\"{}\" data-label=\"{}\" data-x=\"{}\" data-y=\"{}\" "
                       "cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"4\" fill=\"{}\"/>\n",
                       i, xml_escape(p.label), p.x, p.y, sx(p.x), sy(p.y), color);
      // Labels alternate above and below the curve, so neighbouring points' labels do not collide.
      o += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" font-size=\"10\" fill=\"{}\">{}</text>\n", sx(p.x) + 6,
                       sy(p.y) + (k % 2 ? 15 : -6), color, xml_escape(p.label));
    }
    o += "</g>\n";
  }
  // Legend below the x title.
  o += "<g class=\"legend\" font-size=\"12\">\n";
  for (size_t i = 0; i < chart.series.size(); ++i) {
    const double y = legend_y + kLegendRow * static_cast<double>(i);
    const char* color = kColors[i % std::size(kColors)];
    o += fmt::format("<line x1=\"{0:.1f}\" y1=\"{1:.1f}\" x2=\"{2:.1f}\" y2=\"{1:.1f}\" stroke=\"{3}\" "
                     "stroke-width=\"2\"/><circle cx=\"{4:.1f}\" cy=\"{1:.1f}\" r=\"3.5\" fill=\"{3}\"/>"
                     "<text x=\"{5:.1f}\" y=\"{6:.1f}\">{7}</text>\n",
                     kLeft, y - 4, kLeft + 24, color, kLeft + 12, kLeft + 32, y, xml_escape(chart.series[i].name));
  }
  o += "</g>\n";
  o += "</svg>\n";
  return o;
}

}  // namespace m2::loadgen
