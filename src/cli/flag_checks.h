// Range checks for numeric flags, run by CLI11 on the text as given, before
// it is converted and before anything loads: a value out of range (or that
// the option's type would wrap, like `--port 99999` or `--max-waiting -1`)
// is refused with the flag, the allowed range and the value
// ("--port: must be an integer in [0, 65535], got '99999'").
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>

namespace m2::cli {

// An integer in [lo, hi] (decimal, no sign on a non-negative range, no
// fraction, no trailing characters).
CLI::Validator int_range(int64_t lo, int64_t hi);
// A finite number in [lo, hi].
CLI::Validator number_range(double lo, double hi);
// A finite number in (0, hi].
CLI::Validator positive_number(double hi);
// A string that is not empty.
CLI::Validator non_empty();

}  // namespace m2::cli
