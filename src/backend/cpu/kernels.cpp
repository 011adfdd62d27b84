#include "backend/cpu/kernels.h"

namespace m2::cpu {

const Kernels& kernels_for(Isa isa) {
#if defined(__x86_64__)
  switch (isa) {
    case Isa::kAvx512Bf16: return kernels_avx512bf16();
    case Isa::kAvx512: return kernels_avx512();
    case Isa::kAvx2: return kernels_avx2();
    case Isa::kGeneric: break;
  }
#endif
  (void)isa;
  return kernels_generic();
}

const Kernels& kernels() {
  static const Kernels& k = kernels_for(active_isa());
  return k;
}

}  // namespace m2::cpu
