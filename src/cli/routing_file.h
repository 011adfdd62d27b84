// The routing files of `m2cpp generate` and `m2cpp logits`
// (--routing-capture, --routing-replay): raw little-endian int32 expert ids
// [rows, layers, top_k], no header (numpy.fromfile reads them), the layout of
// GreedyOptions' routing and of the server's routed experts (docs/rollout.md).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "util/status.h"

namespace m2::cli {

// Whole rows of `per_row` (layers x top_k) ids; errors name the flag and file.
Result<std::vector<int32_t>> read_routing_file(const std::string& path, int64_t per_row);
Status write_routing_file(const std::string& path, const std::vector<int32_t>& ids);

}  // namespace m2::cli
