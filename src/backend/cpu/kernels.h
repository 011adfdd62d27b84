// Single-threaded CPU kernels, compiled once per ISA level (generic, AVX2,
// AVX-512, AVX-512-BF16) from one template (kernels_impl.h) and chosen at run
// time. The CPU backend splits work across threads and calls these.
//
// Weights stay in their stored dtype and are converted to fp32 in registers;
// all accumulation is fp32. For a given ISA, each output row's arithmetic is
// the same whatever the batch size T (batch invariance).
#pragma once

#include <cstdint>

#include "tensor/dtype.h"
#include "util/cpu_features.h"

namespace m2::cpu {

// A weight matrix [rows, ld] in its stored dtype. F8 rows are scaled by
// scales[(r / block_rows) * scale_ld + c / block_cols].
struct WeightRef {
  DType dtype = DType::kF32;
  const void* data = nullptr;
  int64_t ld = 0;  // elements per row (= K)
  const float* scales = nullptr;
  int64_t scale_ld = 0;
  int block_rows = 128;
  int block_cols = 128;
};

struct Kernels {
  Isa isa;
  // y[t, n] = Σ_k x[t, k] · W[n, k] for t < T, n in [n_begin, n_end).
  void (*matmul)(const float* x, int64_t T, int64_t ldx, int64_t K, const WeightRef& w, int64_t n_begin,
                 int64_t n_end, float* y, int64_t ldy);
  void (*to_f32)(DType src_type, const void* src, float* dst, int64_t n);
  void (*from_f32)(DType dst_type, const float* src, void* dst, int64_t n);  // RNE
  // s[g, j] = scale · q[g]·k_j for G query heads q [G, hd] (contiguous) and n
  // keys k_j at k + j * k_stride (elements) of `kt`. FP8 keys are multiplied
  // by their own scale ks[j * ks_stride] (ks is null for other dtypes).
  void (*attn_scores)(const float* q, int G, int64_t hd, const void* k, DType kt, int64_t n, int64_t k_stride,
                      const float* ks, int64_t ks_stride, float scale, float* s, int64_t lds);
  // out[g] += Σ_j p[g, j] · v_j for G heads, out [G, hd] contiguous; FP8
  // values scaled by vs[j * vs_stride].
  void (*attn_accum)(const float* p, int64_t ldp, int G, const void* v, DType vt, int64_t n, int64_t v_stride,
                     const float* vs, int64_t vs_stride, int64_t hd, float* out);
  // Σ p[i] with vector loads: the memory-bandwidth probe of `bench roofline`.
  float (*sum_f32)(const float* p, int64_t n);
  // `iters` steps of kFmaChains independent vector FMA chains on registers:
  // the fp32 FMA peak probe of `bench roofline` (iters x kFmaChains x lanes
  // x 2 FLOP). The result only keeps the compiler from dropping the work.
  float (*fma_probe)(int64_t iters);
  int lanes;  // fp32 lanes of the ISA's vectors
};
// More than FMA latency x FMA ports (4 x 2 on current x86 cores) and, with
// the two operands, within AVX2's 16 vector registers: 16 chains spilled
// one and measured ~62 % of the AVX2 peak (AVX-512, 32 registers: the same
// at 8-16 chains).
constexpr int kFmaChains = 12;

// The kernels of the active ISA (util/cpu_features.h: CPUID, M2CPP_ISA).
const Kernels& kernels();
// The kernels of a given ISA (must be supported by this CPU).
const Kernels& kernels_for(Isa isa);

// Per-ISA tables, defined in kernels_<isa>.cpp.
const Kernels& kernels_generic();
const Kernels& kernels_avx2();
const Kernels& kernels_avx512();
const Kernels& kernels_avx512bf16();

}  // namespace m2::cpu
