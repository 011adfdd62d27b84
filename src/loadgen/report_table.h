// The readable report of a serving benchmark run on stdout: a throughput
// table (one row per level), a latency table (TTFT, TPOT, ITL, E2EL: mean
// p50 p90 p99), then per level whatever needs attention (errors, output
// lengths that differ from what was asked, prefix-cache hit rates) and, for
// agentic sessions, TTFT and cache hits per turn.
#pragma once

#include <string>

#include "util/json.h"

namespace m2::loadgen {

// `run` is the JSON that `bench serve` writes.
std::string format_report(const Json& run);

}  // namespace m2::loadgen
