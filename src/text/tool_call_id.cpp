#include "text/tool_call_id.h"

namespace m2::text {
namespace {

uint64_t entropy_seed() {
  std::random_device rd;
  return (static_cast<uint64_t>(rd()) << 32) ^ rd();
}

}  // namespace

ToolCallIdGenerator::ToolCallIdGenerator(std::optional<uint64_t> seed)
    : rng_(seed ? *seed : entropy_seed()) {}

std::string ToolCallIdGenerator::next() {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string id = "call_";
  for (int word = 0; word < 2; ++word) {
    uint64_t bits = rng_();
    for (int i = 0; i < (word == 0 ? 16 : 8); ++i, bits >>= 4) id.push_back(kHex[bits & 0xF]);
  }
  return id;
}

}  // namespace m2::text
