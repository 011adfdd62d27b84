// Portable kernels: 8-lane loops the compiler vectorizes for the baseline ISA.
#include <array>
#include <cmath>

#include <algorithm>
#include <vector>

#include "backend/cpu/kernels.h"

namespace m2::cpu {
namespace generic {

struct V {
  struct F {
    float v[8];
  };
  static constexpr int W = 8;
  static constexpr int kMaxTT = 4;
  static constexpr int kPanelTT = 4;
  static constexpr float kFp8Mul = 1.0f;  // load_fp8 returns true values

  static F zero() { return set1(0.0f); }
  static F set1(float a) {
    F r;
    for (float& x : r.v) x = a;
    return r;
  }
  static F load(const float* p) {
    F r;
    for (int i = 0; i < W; ++i) r.v[i] = p[i];
    return r;
  }
  static void store(float* p, F a) {
    for (int i = 0; i < W; ++i) p[i] = a.v[i];
  }
  static F fma(F a, F b, F c) {
    for (int i = 0; i < W; ++i) c.v[i] = std::fma(a.v[i], b.v[i], c.v[i]);
    return c;
  }
  static F mul(F a, F b) {
    for (int i = 0; i < W; ++i) a.v[i] *= b.v[i];
    return a;
  }
  static F add(F a, F b) {
    for (int i = 0; i < W; ++i) a.v[i] += b.v[i];
    return a;
  }
  static float reduce(F a) {
    // Pairwise, like the SIMD versions: ((0+4)+(2+6)) + ((1+5)+(3+7)).
    float s[4];
    for (int i = 0; i < 4; ++i) s[i] = a.v[i] + a.v[i + 4];
    return (s[0] + s[2]) + (s[1] + s[3]);
  }
  static F load_bf16(const uint16_t* p) {
    F r;
    for (int i = 0; i < W; ++i) r.v[i] = bf16_to_f32(p[i]);
    return r;
  }
  static F load_f16(const uint16_t* p) {
    F r;
    for (int i = 0; i < W; ++i) r.v[i] = f16_to_f32(p[i]);
    return r;
  }
  static F load_fp8(const uint8_t* p) {
    static const auto lut = [] {
      std::array<float, 256> t{};
      for (int i = 0; i < 256; ++i) t[i] = f8e4m3_to_f32(static_cast<uint8_t>(i));
      return t;
    }();
    F r;
    for (int i = 0; i < W; ++i) r.v[i] = lut[p[i]];
    return r;
  }
  static void store_bf16(uint16_t* p, F a) {
    for (int i = 0; i < W; ++i) p[i] = f32_to_bf16(a.v[i]);
  }
};

#include "backend/cpu/kernels_impl.h"

}  // namespace generic

const Kernels& kernels_generic() { return generic::make_kernels<generic::V>(Isa::kGeneric); }

}  // namespace m2::cpu
