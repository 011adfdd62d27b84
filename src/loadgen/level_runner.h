// Runs one level of a serving benchmark: sessions through at most
// `concurrency` requests in flight (one worker thread and one keep-alive
// connection per slot), optionally arriving as a Poisson process of
// `request_rate` sessions per second (vLLM's --request-rate with
// --max-concurrency). A stop flag (Ctrl-C) interrupts the requests in flight;
// what had completed is kept.
#pragma once

#include <atomic>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "loadgen/http_client.h"
#include "loadgen/openai_request.h"
#include "loadgen/prefix_cache_metrics.h"
#include "loadgen/request_sample.h"
#include "loadgen/token_source.h"
#include "loadgen/workload.h"

namespace m2::loadgen {

struct LevelSpec {
  int concurrency = 0;      // requests in flight at most (0: no limit)
  double request_rate = 0;  // sessions per second, Poisson arrivals (0: all at once)
  std::string label;        // "c=16", "rate=4"
};

struct RunContext {
  BaseUrl url;
  std::string api_key;
  RequestOptions request;
  TokenSource* tokens = nullptr;          // encodes replies into the next agentic turn
  const std::atomic<bool>* stop = nullptr;  // set by Ctrl-C
  bool progress = false;                  // draw a progress bar on stderr
};

struct LevelRun {
  LevelSpec spec;
  std::vector<RequestSample> samples;  // finished requests by start time (interrupted ones left out)
  double duration_s = 0;               // level start to the end of its last request
  bool interrupted = false;
  std::optional<PrefixCacheCounters> cache_before, cache_after;  // the server's, around the level
};

LevelRun run_level(const RunContext& ctx, const LevelSpec& spec, const std::vector<Session>& sessions,
                   uint64_t seed);

}  // namespace m2::loadgen
