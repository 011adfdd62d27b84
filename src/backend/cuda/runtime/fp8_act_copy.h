// The FP8 copy of one activation, written by the kernel that produces the
// activation beside its fp32 output (Fp8Out, runtime/device_types.h: RMSNorm, the prefill
// attention), so that the FP8 products reading it next (dense matmul, the
// grouped MoE) skip their own quantisation kernel. The Backend interface
// keeps passing fp32 Acts; the hand-over is explicit: the producer op
// returns an ActCopy (model/backend.h) naming this copy, the model passes it
// to the products that read that activation, and a product uses it only if
// it is still the latest copy (its serial) and of that product's own input.
//
// One copy at a time, in two device buffers owned here and sized up front
// (CudaBackend::reserve_scratch; a growth bumps the memory generation, like
// any scratch: recorded graphs hold addresses). In the model's order every
// copy is read before the next producer writes one (norm -> q|k|v,
// attention -> o_proj, norm -> MoE), so one buffer serves them all; a
// handle kept past that is refused, not misread. All work is on the
// backend's one stream, so a producer may overwrite the buffers while
// earlier readers are queued. A recorded step graph replays the copies its
// recording used.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "backend/cuda/runtime/device_buffer.h"
#include "backend/cuda/runtime/device_types.h"
#include "model/backend.h"

namespace m2::cuda {

class Fp8ActCopy {
 public:
  // `enabled` false (CudaOptions::fused_quant off): produce() returns none, so
  // every FP8 product quantises its input itself (A/B switch).
  explicit Fp8ActCopy(bool enabled) : enabled_(enabled) {}
  Fp8ActCopy(const Fp8ActCopy&) = delete;
  Fp8ActCopy& operator=(const Fp8ActCopy&) = delete;

  bool enabled() const { return enabled_; }
  // Room for copies of up to `codes` = T x K values (CudaBackend::reserve_scratch).
  void reserve(size_t codes, cudaStream_t stream);

  // Where the producer about to write `out` [T, K] (K a multiple of 128)
  // writes its copy, and in `*handle` the ActCopy naming it (the previous
  // copy is retired). Disabled: none, and an empty handle.
  Fp8Out produce(const Act& out, ActCopy* handle, cudaStream_t stream);
  // The copy `xc` names for a reader of `x`, or none (null q) when xc is
  // empty, retired, another backend's, or of another Act. Counted in uses().
  Fp8Out use(const ActCopy& xc, const Act& x);
  // Readers handed a copy so far (tests check that the fused path is taken).
  int64_t uses() const { return uses_; }

 private:
  bool enabled_;
  uint64_t serial_ = 0;  // of the latest copy (0: none yet)
  Fp8Out copy_;
  DeviceBuffer q_{"FP8 copy codes"}, s_{"FP8 copy scales"};
  int64_t uses_ = 0;
};

}  // namespace m2::cuda
