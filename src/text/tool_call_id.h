// Ids of parsed tool calls: "call_" + 24 lowercase hex digits, as vLLM makes
// them (uuid4().hex[:24]). Random by default; a seed makes them repeatable
// (tests, `m2cpp parse --seed`).
#pragma once

#include <cstdint>
#include <optional>
#include <random>
#include <string>

namespace m2::text {

class ToolCallIdGenerator {
 public:
  // Seeded from std::random_device when `seed` is empty.
  explicit ToolCallIdGenerator(std::optional<uint64_t> seed = std::nullopt);
  std::string next();

 private:
  std::mt19937_64 rng_;
};

}  // namespace m2::text
