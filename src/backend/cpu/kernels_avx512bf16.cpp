// AVX-512 kernels with the BF16 extension: fp32 -> bf16 conversion (KV cache
// writes) in one instruction (vcvtneps2bf16, round to nearest even). Unlike
// the other levels it flushes fp32 denormal inputs (|x| < 2^-126) to zero, as
// the instruction does; activations that small carry no information.
#include "backend/cpu/avx512_policy.h"
#include <algorithm>
#include <cmath>
#include <vector>

#include "backend/cpu/kernels.h"

namespace m2::cpu {
namespace avx512bf16 {

struct V : Avx512Base {
  static void store_bf16(uint16_t* p, F a) {
    const __m256bh h = _mm512_cvtneps_pbh(a);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), reinterpret_cast<const __m256i&>(h));
  }
};

#include "backend/cpu/kernels_impl.h"

}  // namespace avx512bf16

const Kernels& kernels_avx512bf16() { return avx512bf16::make_kernels<avx512bf16::V>(Isa::kAvx512Bf16); }

}  // namespace m2::cpu
