#include "cli/flag_checks.h"

#include <charconv>
#include <cmath>
#include <cstdlib>

#include <fmt/format.h>

namespace m2::cli {
namespace {

bool parse_double(const std::string& text, double* out) {
  if (text.empty()) return false;
  char* end = nullptr;
  *out = std::strtod(text.c_str(), &end);
  return end == text.c_str() + text.size() && std::isfinite(*out);
}

}  // namespace

CLI::Validator int_range(int64_t lo, int64_t hi) {
  return CLI::Validator(
      [lo, hi](std::string& text) -> std::string {
        int64_t v = 0;
        const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
        if (ec == std::errc() && end == text.data() + text.size() && v >= lo && v <= hi) return "";
        return fmt::format("must be an integer in [{}, {}], got '{}'", lo, hi, text);
      },
      fmt::format("INT in [{}, {}]", lo, hi));
}

CLI::Validator number_range(double lo, double hi) {
  return CLI::Validator(
      [lo, hi](std::string& text) -> std::string {
        double v = 0;
        if (parse_double(text, &v) && v >= lo && v <= hi) return "";
        return fmt::format("must be a number in [{}, {}], got '{}'", lo, hi, text);
      },
      fmt::format("NUMBER in [{}, {}]", lo, hi));
}

CLI::Validator positive_number(double hi) {
  return CLI::Validator(
      [hi](std::string& text) -> std::string {
        double v = 0;
        if (parse_double(text, &v) && v > 0 && v <= hi) return "";
        return fmt::format("must be a number in (0, {}], got '{}'", hi, text);
      },
      fmt::format("NUMBER in (0, {}]", hi));
}

CLI::Validator non_empty() {
  return CLI::Validator([](std::string& text) -> std::string { return text.empty() ? "must not be empty" : ""; },
                        "TEXT (not empty)");
}

}  // namespace m2::cli
