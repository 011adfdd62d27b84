// Token counts for building prompts of exact lengths: the server's own
// /tokenize and /detokenize (vLLM's routes, which m2cpp serve also answers),
// or a local tokenizer.json (--tokenizer DIR) for servers without them.
// Both are thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "loadgen/http_client.h"
#include "util/status.h"

namespace m2::loadgen {

class TokenSource {
 public:
  virtual ~TokenSource() = default;
  // The ids of `text` as a prompt's content (no special tokens added).
  virtual Result<std::vector<int32_t>> encode(const std::string& text) = 0;
  virtual Result<std::string> decode(const std::vector<int32_t>& ids) = 0;
};

std::unique_ptr<TokenSource> server_token_source(BaseUrl url, std::string api_key, std::string model);
Result<std::unique_ptr<TokenSource>> local_token_source(const std::string& dir);

// The distinct ids of a built-in English text: prompts are drawn from them,
// so they hold ordinary tokens only (no special or unused ids) and route
// through the experts as text does.
Result<std::vector<int32_t>> token_pool(TokenSource& source);

struct ExactText {
  std::string text;
  int64_t tokens = 0;  // as the source counts them (== the length asked unless it could not be reached)
};

// A text of `n` tokens: ids drawn from `pool`, decoded, re-encoded, and cut
// or extended until the count is exact (a few rounds at most; BPE merges at
// the seams move it by a token or two).
Result<ExactText> exact_length_text(TokenSource& source, const std::vector<int32_t>& pool, int64_t n,
                                    std::mt19937_64& rng);

}  // namespace m2::loadgen
