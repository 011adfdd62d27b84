// AVX2 + FMA + F16C kernels (compiled with those flags only; chosen at run time).
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "backend/cpu/kernels.h"

namespace m2::cpu {
namespace avx2 {

struct V {
  using F = __m256;
  static constexpr int W = 8;
  static constexpr int kMaxTT = 2;  // 2 tokens x 4 rows = 8 accumulators of 16 registers
  // The prefill panel's tile (matmul_blocked): 3 tokens x 4 rows = 12
  // accumulators + 4 weight vectors, each x vector loaded where it is used.
  // In L1 on a Zen 5 core: 2 x 4 ran at 60 % of the FMA peak (6 loads a
  // step for 8 FMAs), 3 x 4 at 94 %.
  static constexpr int kPanelTT = 3;
  // load_fp8 widens e4m3 to f16 bit patterns (exponent bias 15 instead of 7),
  // so it returns value / 2^8; the scale multiplier carries the 2^8.
  static constexpr float kFp8Mul = 256.0f;

  static F zero() { return _mm256_setzero_ps(); }
  static F set1(float a) { return _mm256_set1_ps(a); }
  static F load(const float* p) { return _mm256_loadu_ps(p); }
  static void store(float* p, F a) { _mm256_storeu_ps(p, a); }
  static F fma(F a, F b, F c) { return _mm256_fmadd_ps(a, b, c); }
  static F mul(F a, F b) { return _mm256_mul_ps(a, b); }
  static F add(F a, F b) { return _mm256_add_ps(a, b); }
  static float reduce(F a) {
    const __m128 s = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));  // i + (i+4)
    const __m128 t = _mm_add_ps(s, _mm_movehl_ps(s, s));                                   // (0,1) + (2,3)
    return _mm_cvtss_f32(_mm_add_ss(t, _mm_movehdup_ps(t)));
  }
  static F load_bf16(const uint16_t* p) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
  }
  static F load_f16(const uint16_t* p) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  }
  static F load_fp8(const uint8_t* p) {
    // (The bit moves of avx512_policy.h's load_fp8.)
    const __m128i w = _mm_cvtepu8_epi16(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
    return _mm256_cvtph_ps(_mm_and_si128(_mm_srai_epi16(_mm_slli_epi16(w, 8), 1), _mm_set1_epi16(-16385)));
  }
  // 32 e4m3 weights p[0, 32) as four vectors of load_fp8's values, in k's
  // own order: byte interleaves with zero put every byte at the top of a
  // 16-bit word at once (a 128-bit lane's low bytes: weights 0-7 and 16-23,
  // its high bytes: 8-15 and 24-31), then load_fp8's two ops a word.
  static void load_fp8x4(const uint8_t* p, F out[4]) {
    const __m256i w = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)), z = _mm256_setzero_si256();
    const __m256i m = _mm256_set1_epi16(-16385);
    const __m256i lo = _mm256_and_si256(_mm256_srai_epi16(_mm256_unpacklo_epi8(z, w), 1), m);
    const __m256i hi = _mm256_and_si256(_mm256_srai_epi16(_mm256_unpackhi_epi8(z, w), 1), m);
    out[0] = _mm256_cvtph_ps(_mm256_castsi256_si128(lo));
    out[1] = _mm256_cvtph_ps(_mm256_castsi256_si128(hi));
    out[2] = _mm256_cvtph_ps(_mm256_extracti128_si256(lo, 1));
    out[3] = _mm256_cvtph_ps(_mm256_extracti128_si256(hi, 1));
  }
  static void store_bf16(uint16_t* p, F a) {
    const __m256i u = _mm256_castps_si256(a);
    const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
    const __m256i r = _mm256_srli_epi32(_mm256_add_epi32(u, _mm256_add_epi32(lsb, _mm256_set1_epi32(0x7fff))), 16);
    const __m128i packed = _mm_packus_epi32(_mm256_castsi256_si128(r), _mm256_extracti128_si256(r, 1));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p), packed);
  }
};

#include "backend/cpu/kernels_impl.h"

}  // namespace avx2

const Kernels& kernels_avx2() { return avx2::make_kernels<avx2::V>(Isa::kAvx2); }

}  // namespace m2::cpu
