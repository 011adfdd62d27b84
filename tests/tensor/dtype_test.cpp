#include "tensor/dtype.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

namespace m2 {
namespace {

TEST(Fp8E4M3, KnownValues) {
  EXPECT_EQ(f8e4m3_to_f32(0x00), 0.0f);
  EXPECT_EQ(f8e4m3_to_f32(0x7e), 448.0f);            // max finite
  EXPECT_EQ(f8e4m3_to_f32(0xfe), -448.0f);
  EXPECT_EQ(f8e4m3_to_f32(0x38), 1.0f);              // exponent 7 = bias
  EXPECT_EQ(f8e4m3_to_f32(0x08), std::ldexp(1.0f, -6));  // smallest normal
  EXPECT_EQ(f8e4m3_to_f32(0x01), std::ldexp(1.0f, -9));  // smallest subnormal
  EXPECT_EQ(f8e4m3_to_f32(0x07), 7 * std::ldexp(1.0f, -9));
  EXPECT_TRUE(std::isnan(f8e4m3_to_f32(0x7f)));
  EXPECT_TRUE(std::isnan(f8e4m3_to_f32(0xff)));
  EXPECT_EQ(f8e4m3_to_f32(0x78), 256.0f);            // 0.1111.000: no infinities in e4m3fn
}

TEST(Fp8E4M3, EveryCodeRoundTrips) {
  for (int c = 0; c < 256; ++c) {
    if ((c & 0x7f) == 0x7f) continue;  // NaN
    const float v = f8e4m3_to_f32(static_cast<uint8_t>(c));
    const uint8_t back = f32_to_f8e4m3(v);
    if (v == 0.0f) {
      EXPECT_EQ(back & 0x7f, 0) << c;
    } else {
      EXPECT_EQ(back, c) << "code " << c << " value " << v;
    }
  }
}

TEST(Fp8E4M3, RoundsToNearestEvenAndSaturates) {
  // Between 1.0 (0x38) and 1.125 (0x39): the midpoint ties to even (0x38).
  EXPECT_EQ(f32_to_f8e4m3(1.0625f), 0x38);
  EXPECT_EQ(f32_to_f8e4m3(1.07f), 0x39);
  EXPECT_EQ(f32_to_f8e4m3(1000.0f), 0x7e);
  EXPECT_EQ(f32_to_f8e4m3(-1000.0f), 0xfe);
  // Nearest code for random values: no code is closer.
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> u(-500.0f, 500.0f);
  for (int i = 0; i < 20000; ++i) {
    const float v = u(rng) * std::ldexp(1.0f, -static_cast<int>(rng() % 16));
    const float got = f8e4m3_to_f32(f32_to_f8e4m3(v));
    if (std::fabs(v) >= 448.0f) continue;
    for (int c = 0; c < 256; ++c) {
      if ((c & 0x7f) == 0x7f) continue;
      ASSERT_LE(std::fabs(got - v), std::fabs(f8e4m3_to_f32(static_cast<uint8_t>(c)) - v)) << v;
    }
  }
}

TEST(Bf16, RoundsToNearestEven) {
  EXPECT_EQ(f32_to_bf16(1.0f), 0x3f80);
  EXPECT_EQ(bf16_to_f32(0x3f80), 1.0f);
  // 1 + 2^-8 is halfway between 1 and 1 + 2^-7: ties to even (1.0).
  EXPECT_EQ(f32_to_bf16(1.0f + std::ldexp(1.0f, -8)), 0x3f80);
  // 1 + 3*2^-8 is halfway between 1+2^-7 (odd) and 1+2^-6: ties to even.
  EXPECT_EQ(f32_to_bf16(1.0f + 3 * std::ldexp(1.0f, -8)), 0x3f82);
  EXPECT_EQ(f32_to_bf16(-2.0f), 0xc000);
  EXPECT_TRUE(std::isnan(bf16_to_f32(f32_to_bf16(std::nanf("")))));
}

TEST(F16, ConvertsBothWays) {
  EXPECT_EQ(f16_to_f32(0x3c00), 1.0f);
  EXPECT_EQ(f16_to_f32(0x7bff), 65504.0f);
  EXPECT_EQ(f16_to_f32(0x0001), std::ldexp(1.0f, -24));
  EXPECT_TRUE(std::isinf(f16_to_f32(0x7c00)));
  for (uint32_t h = 0; h < 0x7c00; ++h) {  // every finite positive half round-trips
    ASSERT_EQ(f32_to_f16(f16_to_f32(static_cast<uint16_t>(h))), h);
    ASSERT_EQ(f32_to_f16(-f16_to_f32(static_cast<uint16_t>(h))), h | 0x8000u);
  }
  EXPECT_EQ(f32_to_f16(1e6f), 0x7c00);
}

TEST(DType, NamesRoundTrip) {
  for (DType t : {DType::kF32, DType::kBF16, DType::kF16, DType::kF8E4M3, DType::kI32, DType::kI64}) {
    EXPECT_EQ(dtype_from_name(dtype_name(t)), t);
  }
  EXPECT_FALSE(dtype_from_name("F8_E5M2").has_value());
}

}  // namespace
}  // namespace m2
