// AVX-512 vector policy shared by kernels_avx512.cpp and
// kernels_avx512bf16.cpp (which differ in the bf16 store only).
#pragma once

#include <immintrin.h>

#include <cstdint>

namespace m2::cpu {

struct Avx512Base {
  using F = __m512;
  static constexpr int W = 16;
  static constexpr int kMaxTT = 4;  // 4 tokens x 4 rows = 16 accumulators of 32 registers
  // The prefill panel's tile: 4 x 4 ran at 93 % of the FMA peak in L1 (6 x 4, 5 x 5 the same).
  static constexpr int kPanelTT = 4;
  static constexpr float kFp8Mul = 256.0f;  // see avx2's load_fp8

  static F zero() { return _mm512_setzero_ps(); }
  static F set1(float a) { return _mm512_set1_ps(a); }
  static F load(const float* p) { return _mm512_loadu_ps(p); }
  static void store(float* p, F a) { _mm512_storeu_ps(p, a); }
  static F fma(F a, F b, F c) { return _mm512_fmadd_ps(a, b, c); }
  static F mul(F a, F b) { return _mm512_mul_ps(a, b); }
  static F add(F a, F b) { return _mm512_add_ps(a, b); }
  static float reduce(F a) { return _mm512_reduce_add_ps(a); }
  static F load_bf16(const uint16_t* p) {
    const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
  }
  static F load_f16(const uint16_t* p) {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  }
  static F load_fp8(const uint8_t* p) {
    // e4m3 s.eeee.mmm -> f16 s.0eeee.mmm0000000: the byte to the top (sign at
    // bit 15), an arithmetic shift right by one (magnitude to bits 13:7, the
    // sign copied into bit 14), bit 14 cleared. Three integer ops.
    const __m256i w = _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    const __m256i h = _mm256_and_si256(_mm256_srai_epi16(_mm256_slli_epi16(w, 8), 1), _mm256_set1_epi16(-16385));
    return _mm512_cvtph_ps(h);
  }
  // 64 e4m3 weights p[0, 64) as four vectors (value / 2^8, as load_fp8), in
  // the lane order of permute_x: byte interleaves within 128-bit lanes put
  // every byte at the top of a 16-bit word at once, so 64 weights take 8
  // integer ops and 4 conversions instead of 16 and 4 (decode is bound by
  // these ops per core). Lane l of vector j holds weight perm(j, l):
  //   j = 0: 0-7, 16-23   j = 1: 32-39, 48-55   j = 2: 8-15, 24-31   j = 3: 40-47, 56-63
  static void load_fp8x4(const uint8_t* p, F out[4]) {
    const __m512i w = _mm512_loadu_si512(p), z = _mm512_setzero_si512(), m = _mm512_set1_epi16(-16385);
    const __m512i lo = _mm512_and_si512(_mm512_srai_epi16(_mm512_unpacklo_epi8(z, w), 1), m);
    const __m512i hi = _mm512_and_si512(_mm512_srai_epi16(_mm512_unpackhi_epi8(z, w), 1), m);
    out[0] = _mm512_cvtph_ps(_mm512_castsi512_si256(lo));
    out[1] = _mm512_cvtph_ps(_mm512_extracti64x4_epi64(lo, 1));
    out[2] = _mm512_cvtph_ps(_mm512_castsi512_si256(hi));
    out[3] = _mm512_cvtph_ps(_mm512_extracti64x4_epi64(hi, 1));
  }
  // out[0, 64) = x[0, 64) * s in load_fp8x4's lane order.
  static void permute_x(const float* x, F s, float* out) {
    const __m512i a = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23);
    const __m512i b = _mm512_setr_epi32(8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31);
    const F x0 = load(x), x1 = load(x + 16), x2 = load(x + 32), x3 = load(x + 48);
    store(out, mul(_mm512_permutex2var_ps(x0, a, x1), s));
    store(out + 16, mul(_mm512_permutex2var_ps(x2, a, x3), s));
    store(out + 32, mul(_mm512_permutex2var_ps(x0, b, x1), s));
    store(out + 48, mul(_mm512_permutex2var_ps(x2, b, x3), s));
  }
};

}  // namespace m2::cpu
