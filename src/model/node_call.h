// A group call node 0 sends to the other nodes of a multi-node model
// (model/node_group.h), as bytes: what MiniMaxM2 runs on every rank of a
// group (reserve the step scratch, make the KV cache, run a step), with its
// arguments. The encoding is this build's own (both ends run the same m2cpp:
// the rendezvous checks the version); a malformed call is an error naming the
// byte offset, never a read past the end.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "model/backend.h"
#include "model/minimax_m2.h"
#include "util/status.h"

namespace m2 {

struct NodeCall {
  enum class Kind : uint8_t { kReserve = 1, kMakeKvCache, kForward };
  Kind kind = Kind::kForward;
  StepLimits limits;  // kReserve
  int block_size = 0;  // kMakeKvCache
  int64_t num_blocks = 0;
  DType dtype = DType::kBF16;
  StepInput input;                            // kForward; its seqs' block tables view `tables`
  std::vector<std::vector<int32_t>> tables;   // one per seq (decode only)
};

std::vector<uint8_t> encode_node_call(const NodeCall& call);
// encode_node_call of a kForward call of `input`, without copying it into a NodeCall.
std::vector<uint8_t> encode_forward_call(const StepInput& input);
// `tables` of the result own the block tables input.seqs view.
Result<NodeCall> decode_node_call(std::span<const uint8_t> bytes);

}  // namespace m2
