// `m2cpp bench engine`: offline throughput of the engine (no HTTP).
#pragma once

#include <CLI/CLI.hpp>

#include <functional>

namespace m2::cli {

// Adds the subcommand to `bench`; returns the function that runs it.
std::function<int()> add_bench_engine(CLI::App* bench, CLI::App** sub);

}  // namespace m2::cli
