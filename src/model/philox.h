// Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2,
// 3", SC 2011): a counter-based generator, so the random numbers of a draw
// are a pure function of (key, counter) and every backend computes the same
// ones in any order. Header-only and `__host__ __device__` for the CUDA
// kernels (backend/cuda/sampling/sampling.cu) and the CPU sampler (model/sampling.cpp).
// Checked against Random123's known-answer vectors (tests/model/sampling_test).
#pragma once

#include <cmath>
#include <cstdint>

#ifdef __CUDACC__
#define M2_HOST_DEVICE __host__ __device__
#else
#define M2_HOST_DEVICE
#endif

namespace m2 {

struct Philox4x32 {
  uint32_t v[4];
};

// One Philox4x32-10 block: 4 random words for counter `ctr` under `key`.
M2_HOST_DEVICE inline Philox4x32 philox4x32_10(Philox4x32 ctr, uint32_t key0, uint32_t key1) {
  constexpr uint32_t kM0 = 0xD2511F53u, kM1 = 0xCD9E8D57u;  // round multipliers
  constexpr uint32_t kW0 = 0x9E3779B9u, kW1 = 0xBB67AE85u;  // key schedule (Weyl) increments
  for (int round = 0; round < 10; ++round) {
    if (round > 0) key0 += kW0, key1 += kW1;
    const uint64_t p0 = static_cast<uint64_t>(kM0) * ctr.v[0];
    const uint64_t p1 = static_cast<uint64_t>(kM1) * ctr.v[2];
    const uint32_t hi0 = static_cast<uint32_t>(p0 >> 32), lo0 = static_cast<uint32_t>(p0);
    const uint32_t hi1 = static_cast<uint32_t>(p1 >> 32), lo1 = static_cast<uint32_t>(p1);
    ctr = Philox4x32{{hi1 ^ ctr.v[1] ^ key0, lo1, hi0 ^ ctr.v[3] ^ key1, lo0}};
  }
  return ctr;
}

// The sampler's uniform for token `id` at output position `step` of a
// request seeded `seed`: 53 random bits -> (0, 1) (never 0 or 1, so that
// both logarithms of the Gumbel noise below are finite).
M2_HOST_DEVICE inline double sampling_uniform(uint64_t seed, uint64_t step, uint32_t id) {
  const Philox4x32 r = philox4x32_10(
      Philox4x32{{id, static_cast<uint32_t>(step), static_cast<uint32_t>(step >> 32), 0x5A4D504Cu}},
      static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32));
  const uint64_t bits = (static_cast<uint64_t>(r.v[0]) << 21) ^ (r.v[1] >> 11);  // 53 bits
  return (static_cast<double>(bits) + 0.5) * 0x1.0p-53;
}

// Gumbel(0, 1) noise of that uniform, -log(-log(u)): argmax over the kept
// tokens of (logit / T + noise) is a draw from softmax(logit / T) over them
// (the Gumbel-max trick), and needs no sorted order, so a backend can draw
// from any number of candidates in parallel.
M2_HOST_DEVICE inline double sampling_gumbel(uint64_t seed, uint64_t step, uint32_t id) {
  return -log(-log(sampling_uniform(seed, step, id)));
}

}  // namespace m2
