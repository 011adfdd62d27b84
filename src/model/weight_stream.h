// Streams weight views out of a memory-mapped checkpoint to wherever a
// backend keeps its copies (GPU memory), so that loading never holds the
// whole checkpoint in host memory: the copies run shard by shard in file
// order and by offset within a shard (sequential reads, whatever order the
// backend planned them in), the next `readahead_bytes` of the shard are read
// from the disk in the background while a copy runs, and what has been
// copied leaves the process's resident set every `release_bytes`
// (MappedFile::release) and with its whole shard at the shard's end, so a
// load holds about 2 x release_bytes of the checkpoint at a time. Host
// views stay valid: a later read faults the bytes in again from the file.
// Only for backends that do not compute from the mapping (not the CPU).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "io/safetensors.h"
#include "util/progress_bar.h"
#include "util/status.h"

namespace m2 {

// One copy of a host view's bytes to `dst`, a byte address in the backend's
// memory (a copy larger than release_bytes is made in pieces, src + i to
// dst + i). A strided view (a tensor-parallel column slice) has `row_bytes`:
// bytes / row_bytes rows of row_bytes each, `src_pitch` apart in the host
// view, packed at dst (pieces of whole rows).
struct WeightCopy {
  const void* src = nullptr;
  uint64_t bytes = 0;
  void* dst = nullptr;
  std::string what;  // for messages, e.g. "layer 3 experts"
  uint64_t row_bytes = 0, src_pitch = 0;

  bool strided() const { return row_bytes != 0; }
  // The bytes of the host view from src to the end of its last row.
  uint64_t span() const { return strided() && bytes ? (bytes / row_bytes - 1) * src_pitch + row_bytes : bytes; }
};

struct WeightStreamOptions {
  std::string label = "weights";  // progress and summary lines
  ProgressBar::Style progress = ProgressBar::Style::kOff;
  uint64_t readahead_bytes = 256ull << 20;
  uint64_t release_bytes = 64ull << 20;
};

// The order stream_weights runs `copies` in: those inside `checkpoint` (may
// be null) by shard, then offset; the others (dummy weights) after them in
// their given order. Indices into `copies`.
std::vector<size_t> weight_stream_order(const Checkpoint* checkpoint, const std::vector<WeightCopy>& copies);

// Runs `copy` on every entry in weight_stream_order, with readahead, release
// and progress as above, then logs the bytes, time and rate. Stops at the
// first error, adding the shard, offset and tensor of the failed copy.
Status stream_weights(const Checkpoint* checkpoint, const std::vector<WeightCopy>& copies,
                      const std::function<Status(const WeightCopy&)>& copy, const WeightStreamOptions& options);

}  // namespace m2
