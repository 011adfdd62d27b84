// The batch sizes decode steps are recorded at (vLLM's "capture sizes"): a
// decode step of `rows` sequences runs padded to the next of them, so that
// at most kGraphSizes shapes per attention class are ever recorded and the
// memory the recorded graphs hold stops growing once a server has seen its
// batch sizes (issue 29's soak). Every size up to 16 is its own (agents'
// batches of a few streams pay nothing), then steps of 8, 16 and 32: a
// padded step computes at most 7/17, 15/65 and 31/257 more rows, copies of
// one of its rows (no more experts read; model/minimax_m2.cpp).
#pragma once

#include <cstdint>

namespace m2::cuda {

constexpr int64_t kMaxGraphRows = 1024;  // larger decode steps run op by op

// The size a decode step of `rows` (1..kMaxGraphRows) rows is recorded at.
constexpr int64_t graph_capture_rows(int64_t rows) {
  const int64_t step = rows <= 16 ? 1 : rows <= 64 ? 8 : rows <= 256 ? 16 : 32;
  return (rows + step - 1) / step * step;
}

// How many sizes there are: 16 + 6 + 12 + 24.
constexpr int64_t kGraphSizes = 58;

}  // namespace m2::cuda
