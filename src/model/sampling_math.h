// The per-token arithmetic of sampling that every backend must do the same
// way, `__host__ __device__` (model/sampling.cpp on the CPU,
// backend/cuda/sampling/sampling.cu on the GPU): the sparse logit edits (banning,
// logit_bias, penalties), and the total order candidates are ranked in.
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>

#include "model/philox.h"

namespace m2 {

// What happens to one token's logit before the draw, vLLM's order:
// banned -> -inf; else + bias, then the repetition penalty (divides a
// positive logit, multiplies a negative one), then - (frequency * count +
// presence). Built on the host (logit_edits()) once per row and token.
struct LogitEdit {
  enum : uint32_t { kBanned = 1, kBias = 2, kRepeat = 4, kSubtract = 8 };
  int32_t id = 0;
  uint32_t flags = 0;
  float bias = 0.0f;
  float subtract = 0.0f;  // frequency_penalty * count + presence_penalty, as the CPU sampler rounds it
};

// The edited logit; `repetition_penalty` is the row's. No fused multiply-add
// can change the rounding: each step is one IEEE operation.
M2_HOST_DEVICE inline float apply_logit_edit(float raw, const LogitEdit& e, float repetition_penalty) {
  if (e.flags & LogitEdit::kBanned) return -INFINITY;
  float l = raw;
  if (e.flags & LogitEdit::kBias) l = l + e.bias;
  if (e.flags & LogitEdit::kRepeat) l = l > 0.0f ? l / repetition_penalty : l * repetition_penalty;
  if (e.flags & LogitEdit::kSubtract) l = l - e.subtract;
  return l;
}

// Candidates are ranked by logit, descending, lower id first on ties. As an
// unsigned key: the float's bits made monotone (NaN ranks below -inf), then
// the id inverted, so that a larger key is a better candidate. 32 + 18 bits:
// ids must be below 2^18 (vocabularies up to 262144).
constexpr int kSampleIdBits = 18;
constexpr int64_t kSampleMaxVocab = int64_t{1} << kSampleIdBits;

M2_HOST_DEVICE inline uint32_t float_order_key(float v) {
#ifdef __CUDA_ARCH__
  const uint32_t b = __float_as_uint(v);
#else
  const uint32_t b = std::bit_cast<uint32_t>(v);
#endif
  if ((b & 0x7fffffffu) > 0x7f800000u) return 0;  // NaN
  return (b & 0x80000000u) ? ~b : (b | 0x80000000u);
}

// Keys above this one's are finite or +inf (not -inf, not NaN): drawable.
constexpr uint32_t kNegInfOrderKey = 0x007fffffu;  // float_order_key(-inf)

M2_HOST_DEVICE inline uint64_t sample_rank_key(float v, int32_t id) {
  return (static_cast<uint64_t>(float_order_key(v)) << kSampleIdBits) |
         static_cast<uint64_t>((kSampleMaxVocab - 1) - id);
}

}  // namespace m2
