// Element types of weights, activations and caches, with exact scalar
// conversions. Vector kernels live in backend/; these are the reference
// definitions they are tested against.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string_view>

namespace m2 {

enum class DType : uint8_t { kF32, kBF16, kF16, kF8E4M3, kI32, kI64 };

size_t dtype_size(DType t);
// safetensors spelling: "F32", "BF16", "F16", "F8_E4M3", "I32", "I64".
std::string_view dtype_name(DType t);
std::optional<DType> dtype_from_name(std::string_view name);
inline bool dtype_is_float(DType t) { return t != DType::kI32 && t != DType::kI64; }

inline float f32_from_bits(uint32_t u) { float f; std::memcpy(&f, &u, 4); return f; }
inline uint32_t f32_bits(float f) { uint32_t u; std::memcpy(&u, &f, 4); return u; }

inline float bf16_to_f32(uint16_t h) { return f32_from_bits(static_cast<uint32_t>(h) << 16); }

// Round to nearest even; NaN stays NaN.
inline uint16_t f32_to_bf16(float f) {
  uint32_t u = f32_bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40);
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

// IEEE binary16 -> float, subnormals included.
inline float f16_to_f32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  const uint32_t mant = h & 0x3ffu;
  if (exp == 0) {
    float v = std::ldexp(static_cast<float>(mant), -24);
    return sign ? -v : v;
  }
  if (exp == 31) return f32_from_bits(sign | 0x7f800000u | (mant << 13));
  return f32_from_bits(sign | ((exp + 112) << 23) | (mant << 13));
}

uint16_t f32_to_f16(float f);  // round to nearest even

// float8_e4m3fn: 1 sign, 4 exponent (bias 7), 3 mantissa bits, subnormals,
// no infinities, NaN only for S.1111.111, max finite 448.
inline float f8e4m3_to_f32(uint8_t b) {
  const float sign = (b & 0x80) ? -1.0f : 1.0f;
  const int exp = (b >> 3) & 0xf;
  const int mant = b & 0x7;
  if (exp == 0xf && mant == 0x7) return std::nanf("");
  if (exp == 0) return sign * std::ldexp(static_cast<float>(mant), -9);
  return sign * std::ldexp(1.0f + mant / 8.0f, exp - 7);
}

// Round to nearest even, saturating to +-448 (what PyTorch's cast does for
// finite inputs is saturate-free; callers clamp first when that matters).
uint8_t f32_to_f8e4m3(float f);

}  // namespace m2
