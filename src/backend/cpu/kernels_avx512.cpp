// AVX-512 (F, BW, VL, DQ) kernels; chosen at run time.
#include "backend/cpu/avx512_policy.h"
#include <algorithm>
#include <cmath>
#include <vector>

#include "backend/cpu/kernels.h"

namespace m2::cpu {
namespace avx512 {

struct V : Avx512Base {
  static void store_bf16(uint16_t* p, F a) {
    const __m512i u = _mm512_castps_si512(a);
    const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
    const __m512i r = _mm512_srli_epi32(_mm512_add_epi32(u, _mm512_add_epi32(lsb, _mm512_set1_epi32(0x7fff))), 16);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), _mm512_cvtepi32_epi16(r));
  }
};

#include "backend/cpu/kernels_impl.h"

}  // namespace avx512

const Kernels& kernels_avx512() { return avx512::make_kernels<avx512::V>(Isa::kAvx512); }

}  // namespace m2::cpu
