// The routed-experts fields of OpenAI completions and chat requests
// (docs/rollout.md): `return_routed_experts: true` returns, with each
// choice, the top-k expert ids of every position the model ran for it;
// `routing_replay` forces given expert ids for the prompt's first positions.
// Both use one compact encoding:
//   {"encoding": "base64", "dtype": "uint8" | "uint16", "shape": [positions, layers, top_k],
//    "data": base64 of the ids, little-endian, position-major}
// (uint8 when the model has at most 256 experts, else uint16).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "engine/sampling_params.h"
#include "server/server_context.h"
#include "util/json.h"
#include "util/status.h"

namespace m2::server {

struct RoutingFields {
  bool return_routed_experts = false;
  std::shared_ptr<const std::vector<int32_t>> replay;  // [rows, layers, top_k]; null: none
  int64_t replay_rows = 0;
};

// Reads `return_routed_experts` and `routing_replay` (shape, dtype, ids in
// [0, experts), distinct per position and layer); errors name the field.
Result<RoutingFields> parse_routing_fields(const OrderedJson& body, const ServerContext& ctx);
// Sets the fields on one prompt's params; the replay may cover at most the
// prompt's `prompt_tokens` positions.
Status apply_routing_fields(const RoutingFields& f, int64_t prompt_tokens, SamplingParams* params);
// The encoding above of `ids` [positions, layers, top_k].
OrderedJson routed_experts_json(std::span<const int32_t> ids, const ServerContext& ctx);

std::string base64_encode(std::string_view bytes);
// Strict: the standard alphabet, padded to a multiple of 4; nullopt otherwise.
std::optional<std::string> base64_decode(std::string_view text);

}  // namespace m2::server
