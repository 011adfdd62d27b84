// The FP8 copy of one activation, written by the kernel that produces the
// activation beside its fp32 output (Fp8Out, runtime/device_types.h: RMSNorm, the prefill
// attention), so that the FP8 products reading it next (dense matmul, the
// grouped MoE) skip their own quantisation kernel. The Backend interface
// keeps passing fp32 Acts; this is the CUDA backend's private hand-over.
//
// One copy at a time, in two device buffers owned here and grown to the
// largest step (a growth bumps the memory generation, like any scratch:
// recorded graphs hold addresses). All work is on the backend's one stream,
// so a producer may overwrite the buffers while earlier readers are queued
// (a producer launched for an early start writes only after its
// grid_dependency_wait(), like any of its outputs).
//
// When a copy may be used (the rule the backend follows):
//   - it is of one Act {data, rows, cols}; a reader uses it only for an
//     input equal to that Act;
//   - every op starts with begin_op(), which drops it (CudaBackend::bind(),
//     the first call of every op, does this), except the ops known to read
//     activations and write elsewhere (matmul, route, moe), which start with
//     begin_reader_op(their outputs) instead: it keeps the copy unless one
//     of the outputs overlaps the copy's Act.
// So an op that writes memory (copy_from_host and allocate too) drops the
// copy unless it says otherwise, and forgetting costs the fusion, never
// correctness. The decisions depend only
// on a step's op sequence and shapes, so a recorded step graph replays what
// was decided while recording.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <initializer_list>

#include "backend/cuda/runtime/device_buffer.h"
#include "backend/cuda/runtime/device_types.h"
#include "model/backend.h"

namespace m2::cuda {

// Bytes an op writes: [data, data + bytes).
struct WrittenBytes {
  const void* data = nullptr;
  size_t bytes = 0;
};
inline WrittenBytes written(const Act& a) {
  return {a.data, static_cast<size_t>(a.rows * a.cols) * sizeof(float)};
}

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

  // The start of an op that may write anything: the copy is dropped.
  void begin_op() { live_ = false; }
  // The start of an op that writes only `writes`: the copy is kept unless
  // one of them overlaps its Act.
  void begin_reader_op(std::initializer_list<WrittenBytes> writes);

  // Where the producer about to write `out` [T, K] (K a multiple of 128)
  // writes its copy; from now on the copy is of `out`.
  Fp8Out produce(const Act& out, cudaStream_t stream);
  // The copy of `x` for a reader, or none (null q). Counted in uses().
  Fp8Out use(const Act& x);
  // Readers handed a copy so far (tests check that the fused path is taken).
  int64_t uses() const { return uses_; }

 private:
  bool enabled_;
  bool live_ = false;
  Act act_;  // what the copy is of, while live_
  Fp8Out copy_;
  DeviceBuffer q_{"FP8 copy codes"}, s_{"FP8 copy scales"};
  int64_t uses_ = 0;
};

}  // namespace m2::cuda
