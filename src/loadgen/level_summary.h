// The figures of one benchmark level, named and defined as vLLM's
// `bench serve` reports them (so results compare one to one):
//   TTFT   time to the first output chunk
//   TPOT   per request (e2e - ttft) / (output tokens - 1), then mean/percentiles over requests
//   ITL    every gap between successive output chunks, over all requests
//   E2EL   request latency
// plus throughput (requests/s, output and total tokens/s, and per GPU),
// tokens/s per user = 1 / median TPOT (the x axis of a throughput-
// interactivity Pareto plot), output-length mismatches, errors, prefix-cache
// hit rates (the server's counters and the `cached_tokens` it reports) and,
// for multi-turn sessions, TTFT and cache hits per turn.
#pragma once

#include "loadgen/level_runner.h"
#include "util/json.h"

namespace m2::loadgen {

Json summarize_level(const LevelRun& run, int gpus);

// {"label", "concurrency", "request_rate", "interrupted", "summary", "samples"}
Json level_json(const LevelRun& run, int gpus);

}  // namespace m2::loadgen
