#include "util/cpu_features.h"

#if defined(__x86_64__)
#include <cpuid.h>
#endif

#include <cstdlib>
#include <string>

#include "util/log.h"

namespace m2 {
namespace {

#if defined(__x86_64__)
// CPUID leaf 1, ECX bit 29, asked directly: clang (the sanitizer build's
// compiler) has no "f16c" for __builtin_cpu_supports.
bool has_f16c() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  return __get_cpuid(1, &a, &b, &c, &d) && (c & bit_F16C);
}
#endif

}  // namespace

bool isa_supported(Isa isa) {
#if defined(__x86_64__)
  switch (isa) {
    case Isa::kGeneric: return true;
    case Isa::kAvx2:
      return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && has_f16c();
    case Isa::kAvx512:
      return isa_supported(Isa::kAvx2) && __builtin_cpu_supports("avx512f") &&
             __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
             __builtin_cpu_supports("avx512dq");
    case Isa::kAvx512Bf16:
      return isa_supported(Isa::kAvx512) && __builtin_cpu_supports("avx512bf16");
  }
  return false;
#else
  return isa == Isa::kGeneric;
#endif
}

Isa detect_isa() {
  for (Isa isa : {Isa::kAvx512Bf16, Isa::kAvx512, Isa::kAvx2}) {
    if (isa_supported(isa)) return isa;
  }
  return Isa::kGeneric;
}

std::string_view isa_name(Isa isa) {
  switch (isa) {
    case Isa::kGeneric: return "generic";
    case Isa::kAvx2: return "avx2";
    case Isa::kAvx512: return "avx512";
    case Isa::kAvx512Bf16: return "avx512bf16";
  }
  return "?";
}

Isa active_isa() {
  static const Isa isa = [] {
    Isa best = detect_isa();
    const char* env = std::getenv("M2CPP_ISA");
    if (!env || !*env) return best;
    for (Isa isa : {Isa::kGeneric, Isa::kAvx2, Isa::kAvx512, Isa::kAvx512Bf16}) {
      if (isa_name(isa) == env) {
        if (static_cast<int>(isa) > static_cast<int>(best)) {
          log_warn("M2CPP_ISA={} is not supported by this CPU; using {}", env, isa_name(best));
          return best;
        }
        return isa;
      }
    }
    log_warn("M2CPP_ISA={} is unknown (generic, avx2, avx512, avx512bf16); using {}", env,
             isa_name(best));
    return best;
  }();
  return isa;
}

}  // namespace m2
