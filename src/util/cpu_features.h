// Which SIMD level the CPU kernels run at. Chosen once at run time from
// CPUID (never from -march), overridable with M2CPP_ISA=generic|avx2|avx512|
// avx512bf16 so tests can compare every level against the generic code.
#pragma once

#include <string_view>

namespace m2 {

enum class Isa { kGeneric = 0, kAvx2 = 1, kAvx512 = 2, kAvx512Bf16 = 3 };

// The best level this CPU supports.
Isa detect_isa();
// detect_isa(), lowered by M2CPP_ISA if set.
Isa active_isa();
bool isa_supported(Isa isa);
std::string_view isa_name(Isa isa);

}  // namespace m2
