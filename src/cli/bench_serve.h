// `m2cpp bench serve`: the serving benchmark of an OpenAI-compatible server.
#pragma once

#include <CLI/CLI.hpp>

#include <functional>

namespace m2::cli {

// Adds the subcommand to `bench`; returns the function that runs it.
std::function<int()> add_bench_serve(CLI::App* bench, CLI::App** sub);

}  // namespace m2::cli
