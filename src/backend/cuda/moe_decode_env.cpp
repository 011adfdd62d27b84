// M2CPP_MOE_DECODE: the decode MoE kernels of MoeArgs::decode by default (kernels.h).
#include <cstdlib>
#include <cstring>

#include "backend/cuda/kernels.h"
#include "util/log.h"

namespace m2::cuda {

const char* moe_decode_name(MoeDecode v) {
  switch (v) {
    case MoeDecode::kOld: return "old";
    case MoeDecode::kPdl: return "pdl";
    case MoeDecode::kStream: return "stream";
    case MoeDecode::kStream16: return "stream16";
  }
  return "?";
}

MoeDecode& moe_decode_default() {
  static MoeDecode v = [] {
    const char* s = std::getenv("M2CPP_MOE_DECODE");
    if (!s || !*s) return MoeDecode::kStream;
    for (MoeDecode d : kMoeDecodeAll)
      if (std::strcmp(s, moe_decode_name(d)) == 0) return d;
    log_warn("M2CPP_MOE_DECODE={} is not one of old, pdl, stream, stream16: using stream", s);
    return MoeDecode::kStream;
  }();
  return v;
}

}  // namespace m2::cuda
