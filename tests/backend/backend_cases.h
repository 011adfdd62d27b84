// The backends this build has, for tests written once and run on each
// (llama.cpp's test-backend-ops idea): the CPU backend always, the CUDA
// backend in CUDA builds (skipped at run time without a device). A non-CPU
// backend is held to the CPU backend on the same weights as well as to the
// reference; `exact` says whether a backend's rows are bit-identical across
// chunkings and batches (the CPU's are by construction; a GPU's differ in
// summation order: decode GEMVs vs tiled prefill, key splits; unless it runs
// batch-invariant, CudaOptions::batch_invariant).
#pragma once

#include <cstdlib>
#include <functional>
#include <ostream>
#include <memory>
#include <string>
#include <vector>

#include "model/backend.h"
#ifdef M2CPP_WITH_CUDA
#include "backend/cuda/attention/attention_prefill.h"
#include "backend/cuda/cuda_backend.h"
#include "util/status.h"
#endif

namespace m2::test {

struct BackendCase {
  std::string name;
  bool exact = false;
  std::function<bool()> available;
  std::function<std::unique_ptr<Backend>()> make;
  // Whether prefill chunks (>= 16 rows) of a cache of this dtype and head
  // size take bf16 tensor-core attention (bf16 Q and P: looser bounds).
  std::function<bool(DType, int)> bf16_prefill_attention = [](DType, int) { return false; };
};

#ifdef M2CPP_WITH_CUDA
// The CUDA backend with M2CPP_CUDA_OPTIONS (scripts/gpu_check.sh sets sync=on
// to name a failing op) and then `variant`.
inline BackendCase cuda_case(std::string name, void (*variant)(cuda::CudaOptions&), bool exact = false) {
  BackendCase c{std::move(name), exact, [] { return cuda_device_count() > 0; }, [variant]() -> std::unique_ptr<Backend> {
                  auto o = cuda::CudaOptions::parse("");
                  if (!o.ok()) return nullptr;
                  cuda::CudaOptions v = *o;
                  if (variant) variant(v);
                  return make_cuda_backend(0, v);
                }};
  cuda::CudaOptions v;
  if (variant) variant(v);
  const bool tc = v.tc_attention && !v.batch_invariant;  // batch-invariant: the fp32 general kernel
  c.bf16_prefill_attention = [tc](DType dt, int hd) { return tc && cuda::attention_prefill_supports(dt, hd); };
  return c;
}
#endif

// Every backend of the build, each once with its defaults.
inline std::vector<BackendCase> backend_cases() {
  std::vector<BackendCase> v;
  v.push_back({"cpu", true, [] { return true; }, [] { return make_cpu_backend(); }});
#ifdef M2CPP_WITH_CUDA
  v.push_back(cuda_case("cuda", nullptr));
  v.push_back(cuda_case("cuda_batch_invariant", [](cuda::CudaOptions& o) { o.batch_invariant = true; }, true));
#endif
  return v;
}

// The backends other than the CPU with their kernel variants, for the op
// conformance suite: the CUDA backend's defaults, and every fallback kernel
// the plans can choose (fp32 paths: fp8_gemm=off, tc_attention=off; the SIMT
// GEMV, the SIMT decode MoE, the one-kernel router, the SIMT BF16 matmul).
inline std::vector<BackendCase> device_cases() {
  std::vector<BackendCase> v;
#ifdef M2CPP_WITH_CUDA
  v.push_back(cuda_case("cuda", nullptr));
  v.push_back(cuda_case("cuda_fallbacks", [](cuda::CudaOptions& o) {
    o.fp8_gemm = cuda::Fp8GemmMode::kOff, o.tc_attention = false, o.gemv_mma = false;
    o.moe_decode_wgmma = false, o.route_gemm = false, o.bf16_gemm = false;
  }));
#endif
  return v;
}

// gtest prints a case by its name.
inline void PrintTo(const BackendCase& c, std::ostream* os) { *os << c.name; }

}  // namespace m2::test
