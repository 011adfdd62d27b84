// `m2cpp bench allreduce`: a tensor-parallel group's all-reduce timed from
// 8 KB to 64 MB, peer-to-peer and staged through the host.
#pragma once

#include <CLI/CLI.hpp>

#include <functional>

namespace m2::cli {

// Adds the subcommand to `bench`; returns the function that runs it.
std::function<int()> add_bench_allreduce(CLI::App* bench, CLI::App** sub);

}  // namespace m2::cli
