#include "tensor/dtype.h"

namespace m2 {

size_t dtype_size(DType t) {
  switch (t) {
    case DType::kF32: return 4;
    case DType::kBF16: return 2;
    case DType::kF16: return 2;
    case DType::kF8E4M3: return 1;
    case DType::kI32: return 4;
    case DType::kI64: return 8;
  }
  return 0;
}

std::string_view dtype_name(DType t) {
  switch (t) {
    case DType::kF32: return "F32";
    case DType::kBF16: return "BF16";
    case DType::kF16: return "F16";
    case DType::kF8E4M3: return "F8_E4M3";
    case DType::kI32: return "I32";
    case DType::kI64: return "I64";
  }
  return "?";
}

std::optional<DType> dtype_from_name(std::string_view name) {
  for (DType t : {DType::kF32, DType::kBF16, DType::kF16, DType::kF8E4M3, DType::kI32, DType::kI64}) {
    if (dtype_name(t) == name) return t;
  }
  return std::nullopt;
}

uint16_t f32_to_f16(float f) {
  uint32_t u = f32_bits(f);
  const uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
  u &= 0x7fffffffu;
  if (u > 0x7f800000u) return sign | 0x7e00u;             // NaN
  if (u >= 0x477ff000u) return sign | 0x7c00u;            // overflow -> inf
  if (u < 0x38800000u) {                                  // subnormal or zero in f16
    // value = u as float; f16 subnormal unit is 2^-24.
    const float a = f32_from_bits(u);
    const float scaled = a * 16777216.0f;                 // a / 2^-24
    const float r = std::nearbyint(scaled);               // RNE under default rounding
    return sign | static_cast<uint16_t>(r);
  }
  // Normal: rebias exponent (127 -> 15) and round the 23-bit mantissa to 10.
  uint32_t v = u - (112u << 23);
  v += 0xfffu + ((v >> 13) & 1u);
  return sign | static_cast<uint16_t>(v >> 13);
}

uint8_t f32_to_f8e4m3(float f) {
  if (std::isnan(f)) return 0x7f;
  const uint8_t sign = std::signbit(f) ? 0x80 : 0x00;
  float a = std::fabs(f);
  if (a >= 448.0f) return sign | 0x7e;  // saturate to max finite
  // Smallest normal is 2^-6; subnormal step 2^-9.
  if (a < std::ldexp(1.0f, -6)) {
    const int q = static_cast<int>(std::nearbyint(a * 512.0f));  // 0..8
    return sign | static_cast<uint8_t>(q);  // q == 8 is exactly the smallest normal 0x08
  }
  int e;
  const float m = std::frexp(a, &e);  // a = m * 2^e, m in [0.5, 1)
  // a = (1 + f) * 2^(e-1); mantissa steps of 1/8.
  int exp = e - 1;
  int mant = static_cast<int>(std::nearbyint((m * 2.0f - 1.0f) * 8.0f));
  if (mant == 8) {
    mant = 0;
    ++exp;
  }
  const int biased = exp + 7;
  if (biased > 15 || (biased == 15 && mant == 7)) return sign | 0x7e;
  return sign | static_cast<uint8_t>((biased << 3) | mant);
}

}  // namespace m2
