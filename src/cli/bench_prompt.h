// The token ids `m2cpp bench decode` prefills its context with, and those of
// the warm-up pass before it. Both are uniform over the vocabulary, so the
// tokens spread over the experts as varied text does: a constant id (the
// warm-up once fed id 0 everywhere) sends every token to the same top_k
// experts, and the "cold" pass then timed a few experts' weights, not a cold
// start (issue 25, point 4). The warm-up draws from a stream of its own: the
// timed tokens are the ones the benchmark always timed (seed 1, drawn in
// order), and the warm-up does not run the first timed chunk ahead of time.
#pragma once

#include <algorithm>
#include <cstdint>
#include <random>
#include <vector>

namespace m2::cli {

struct BenchPrompt {
  std::vector<int32_t> warmup;   // [min(chunk, context)]: the first chunk's positions, run once before
  std::vector<int32_t> context;  // [context]: prefilled chunk by chunk, timed
};

// `n` ids drawn uniformly from [0, vocab) by `rng` (modulo: mt19937's 2^32
// outputs make the bias at most vocab / 2^32, ~5e-5 at 200,064 ids).
inline std::vector<int32_t> uniform_tokens(std::mt19937& rng, int64_t n, int vocab) {
  std::vector<int32_t> ids(static_cast<size_t>(std::max<int64_t>(n, 0)));
  for (auto& t : ids) t = static_cast<int32_t>(rng() % static_cast<uint32_t>(vocab));
  return ids;
}

inline BenchPrompt bench_prompt(int64_t context, int64_t chunk, int vocab) {
  std::mt19937 timed(1), warm(2);
  BenchPrompt p;
  p.context = uniform_tokens(timed, context, vocab);
  p.warmup = uniform_tokens(warm, std::min(chunk, context), vocab);
  return p;
}

}  // namespace m2::cli
