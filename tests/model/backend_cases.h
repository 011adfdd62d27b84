// The backends this build has, for tests written once and run on each
// (llama.cpp's test-backend-ops idea): the CPU backend always, the CUDA
// backend in CUDA builds (skipped at run time without a device). A non-CPU
// backend is held to the CPU backend on the same weights as well as to the
// reference; `exact` says whether a backend's rows are bit-identical across
// chunkings and batches (the CPU's are by construction; a GPU's differ in
// summation order: decode GEMVs vs tiled prefill, key splits).
#pragma once

#include <cstdlib>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "model/backend.h"
#ifdef M2CPP_WITH_CUDA
#include "backend/cuda/cuda_backend.h"
#include "util/status.h"
#endif

namespace m2::test {

struct BackendCase {
  std::string name;
  bool exact = false;
  std::function<bool()> available;
  std::function<std::unique_ptr<Backend>()> make;
};

inline std::vector<BackendCase> backend_cases() {
  std::vector<BackendCase> v;
  v.push_back({"cpu", true, [] { return true; }, [] { return make_cpu_backend(); }});
#ifdef M2CPP_WITH_CUDA
  // With M2CPP_CUDA_OPTIONS (scripts/gpu_check.sh sets sync=on to name a failing op).
  v.push_back({"cuda", false, [] { return cuda_device_count() > 0; }, []() -> std::unique_ptr<Backend> {
                 auto o = cuda::CudaOptions::parse("");
                 return o.ok() ? make_cuda_backend(0, *o) : nullptr;
               }});
#endif
  return v;
}

inline std::string backend_case_name(const BackendCase& c) { return c.name; }

}  // namespace m2::test
