// The machine's own ceilings, measured in the same run as a benchmark so that
// every result can be printed as a fraction of them.
#pragma once

#include <cstdint>

namespace m2::cpu {

struct MemoryBandwidth {
  double bytes_per_second = 0;  // best of several passes
  uint64_t buffer_bytes = 0;
  int threads = 0;
};

// Streams a buffer much larger than the caches through all threads of the
// global pool with the active ISA's vector loads (read-only, like weights
// during decode).
MemoryBandwidth measure_read_bandwidth(uint64_t buffer_bytes = 1ull << 30, int passes = 5);

// The machine's fp32 FMA peak: independent vector FMA chains on registers,
// one per thread of the global pool (FLOP/s over all threads).
double measure_fma_peak();

// fp32 FMA throughput of the matmul kernel on a compute-bound, cache-resident
// shape (FLOP/s over all threads).
double measure_matmul_flops();

}  // namespace m2::cpu
