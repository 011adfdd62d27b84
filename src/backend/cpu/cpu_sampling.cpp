// The CPU backend's sampling op (model/sampling.cpp's reference, one row per
// task) and its memory figures (system RAM).
#include <unistd.h>

#include "backend/cpu/cpu_backend.h"

namespace m2::cpu {

Status CpuBackend::sample(Act logits, std::span<const SampleRow> rows, std::span<SampledToken> out) {
  M2_RETURN_IF_ERROR(check_sample_args(logits, rows, out));
  const int64_t V = logits.cols;
  // Each row's result depends on its own inputs only: any thread count gives the same tokens.
  pool_.parallel_for(static_cast<int64_t>(rows.size()), [&](int64_t r, int) {
    out[r] = sample_row(std::span<float>(logits.data + r * V, static_cast<size_t>(V)), rows[r]);
  });
  return Status();
}

MemoryInfo CpuBackend::memory_info() {
  const long page = sysconf(_SC_PAGESIZE), total = sysconf(_SC_PHYS_PAGES), avail = sysconf(_SC_AVPHYS_PAGES);
  MemoryInfo m;
  if (page > 0 && total > 0) m.total_bytes = static_cast<size_t>(total) * static_cast<size_t>(page);
  if (page > 0 && avail > 0) m.free_bytes = static_cast<size_t>(avail) * static_cast<size_t>(page);
  return m;
}

}  // namespace m2::cpu
