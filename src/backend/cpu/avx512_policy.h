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
};

}  // namespace m2::cpu
