// FP8 tensor-core paths for many tokens (plain C++, no device code):
// activations quantised per token per 128 channels to e4m3 (scale = amax /
// 448, DeepSeek / vLLM "per-token-group" quantisation), then an e4m3 x e4m3
// GEMM against the FP8 weights with their 128 x 128 block scales, fp32
// accumulation and output. The dense GEMM runs on our own mma.sync kernel
// (fp8_gemm.cu) or on cuBLASLt's block-scaled FP8 matmul (fp8_matmul.cpp);
// the grouped MoE experts (moe_fp8.cu) on our kernel only.
//
// Numerics: activations lose precision (3 mantissa bits: relative rounding
// error <= 2^-4 per element), so these paths differ from the fp32-activation
// CPU op by ~2-4 % relative (docs/design.md, "FP8 GEMM"); they are used from
// kFp8GemmMinTokens tokens (dense) or the grouped MoE path (more than 64
// pairs), where the GEMV's memory-bound kernels stop being the right tool.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <memory>

#include "backend/cuda/runtime/cuda_options.h"
#include "backend/cuda/runtime/device_buffer.h"
#include "backend/cuda/moe/moe.h"

namespace m2::cuda {

class LtPlans;      // cublaslt_plans.h
struct MatmulPlan;  // matmul_plan.h

// Dense matmuls of at least this many tokens take the FP8 path (below: the
// GEMV of matmul.cu, which streams W once at memory speed).
constexpr int64_t kFp8GemmMinTokens = 17;
// ... or from one token under batch invariance (the FP8 path at every step
// size): the rule the dense plan and the producers' FP8 copies share.
inline int64_t fp8_gemm_min_tokens(const CudaOptions& o) { return o.batch_invariant ? 1 : kFp8GemmMinTokens; }
// Pairs per tile of the grouped FP8 MoE (rows of one expert sharing a pass
// over its weights): 64, or 16 when the step has few pairs per expert (at
// most 8 on average: decode-size steps, where a tile of 64 rows would be
// mostly empty). Both tile shapes give a pair the same bits (fp8_mma.cuh).
constexpr int kFp8MoeTilePairs = 64;
constexpr int kFp8MoeFewTilePairs = 16;
inline int fp8_moe_tile_pairs(int64_t pairs, int64_t experts) {
  return pairs <= 8 * experts ? kFp8MoeFewTilePairs : kFp8MoeTilePairs;
}


// q[t, k] = e4m3(x[t, k] / s[k / 128, t]), s[kb, t] = amax over the 128
// columns of block kb of row t / 448, for t < T; s is k-block-major
// (s[kb * T + t]). K a multiple of 128; x 16-byte aligned, ldx % 4 == 0.
cudaError_t launch_quantize_fp8(const float* x, int64_t T, int64_t K, int64_t ldx, uint8_t* q, float* s,
                                cudaStream_t stream);

// Whether w is an FP8 weight our tensor-core kernels take: rows and columns
// multiples of 128, scales [rows / 128, cols / 128] packed (scale_ld = cols / 128).
bool fp8_gemm_supported(const DeviceWeight& w);

// y[t, n] = Σ_kb s[kb, t] · sw[n / 128, kb] · Σ_{k in kb} q[t, k] · W8[n, k] for
// t < T (own kernel; q, s as launch_quantize_fp8 writes them, s[kb, t] at
// s[kb * s_ld + t], s_ld = 0 meaning T: rows of a larger quantised block;
// y 8-byte aligned, ldy even).
cudaError_t launch_fp8_gemm(const uint8_t* q, const float* s, int64_t T, const DeviceWeight& w, float* y,
                            int64_t ldy, cudaStream_t stream, int64_t s_ld = 0);
// Dynamic shared memory a block of launch_fp8_gemm takes (a device that
// grants less cannot run it: device_caps.h).
size_t fp8_gemm_smem_bytes();

// The dense FP8 path of one backend: quantisation scratch, the cuBLASLt
// handle, workspace and plans (one per shape).
class Fp8Matmul {
 public:
  explicit Fp8Matmul(Fp8GemmMode mode);
  ~Fp8Matmul();
  Fp8Matmul(const Fp8Matmul&) = delete;
  Fp8Matmul& operator=(const Fp8Matmul&) = delete;

  Fp8GemmMode mode() const { return mode_; }
  // Scratch for quantising up to `elems` = T x K activations, and (cuBLASLt
  // mode) the handle and workspace, made now (CudaBackend::reserve_scratch).
  void reserve(int64_t elems, cudaStream_t stream);
  // Quantises x, then run_quantized.
  cudaError_t run(const MatmulPlan& plan, const float* x, int64_t T, int64_t ldx, const DeviceWeight& w, float* y,
                  int64_t ldy, cudaStream_t stream);
  // The plan's FP8 GEMM (fp8_own, or fp8_cublaslt on plan.lt_rows rows and
  // fp8_own on the rest) on x already quantised (q, s as launch_quantize_fp8
  // writes them: by its producer, Fp8Out). cuBLASLt without an algorithm for
  // a shape falls back to the own kernel (logged once per shape).
  cudaError_t run_quantized(const MatmulPlan& plan, const uint8_t* q, const float* s, int64_t T,
                            const DeviceWeight& w, float* y, int64_t ldy, cudaStream_t stream);
  // cuBLASLt on quantised activations (q, s as launch_quantize_fp8 writes
  // them): cudaErrorNotSupported when it has no algorithm for the shape.
  cudaError_t run_cublaslt(const uint8_t* q, const float* s, int64_t T, const DeviceWeight& w, float* y, int64_t ldy,
                           cudaStream_t stream);

  // cuBLASLt's block-scaled FP8 matmul has no algorithm for T not a multiple
  // of 4 (seen on the H200 with cuBLASLt 13: T = 7281, 2810, 7282, 8170), which
  // a serving step's mixed rows usually are: the first kLtRowMultiple-aligned
  // rows go to cuBLASLt with their scales re-strided, the rest to our kernel.
  static constexpr int64_t kLtRowMultiple = 16;
  // ... and only for weights of at least this many rows and columns: the M2
  // shapes (the smallest 1024 x 1536) pass the FP8 GEMM tests on cuBLASLt,
  // but on the aligned test model's 256-wide matrices its results were 50 %
  // off the W8A8 reference (H200, 2026-12-01, cause unknown), so smaller
  // weights take our kernel.
  static constexpr int64_t kLtMinDim = 1024;

 private:
  Fp8GemmMode mode_;
  LtPlans& lt();
  std::unique_ptr<LtPlans> lt_;  // created on first use (or by reserve)
  DeviceBuffer q_{"FP8 GEMM x codes"}, s_{"FP8 GEMM x scales"};
  DeviceBuffer s_main_{"FP8 GEMM re-strided scales"};  // the aligned rows' scales, [K / 128, T_main] (split above)
};

// ---- grouped MoE experts (moe_fp8.cu) ----------------------------------------------
// Whether the experts take the FP8 tensor-core path (FP8, hidden and
// intermediate multiples of 128).
bool moe_fp8_supported(const DeviceExperts& x);
// Dynamic shared memory a block of launch_moe_fp8_experts takes (its larger kernel).
size_t moe_fp8_smem_bytes();
size_t moe_fp8_scratch_bytes(int64_t T, int top_k, int64_t hidden, int64_t intermediate);
// The pairs grouped by expert (moe.cu's grouping: sorted[] pair indices,
// tiles {expert, first, count} of at most tile_pairs pairs (one of the two
// above), *num_tiles of at most max_tiles): y[p, :] = W2_e(silu(W1_e x_t) ⊙ W3_e x_t) for every
// pair p = t * top_k + j, e its expert, x_t and the SwiGLU output u
// quantised per 128 channels (u by the up kernel's epilogue).
struct MoeFp8Groups {
  const int32_t* sorted = nullptr;
  const int4* tiles = nullptr;
  const int* num_tiles = nullptr;
  int64_t max_tiles = 0;
  int tile_pairs = kFp8MoeTilePairs;
};
cudaError_t launch_moe_fp8_experts(const MoeArgs& a, const MoeFp8Groups& groups, void* scratch, float* y,
                                   cudaStream_t stream);
// Where launch_moe_fp8_experts keeps the quantised activations in `scratch`
// (tests read them): x8 [T, H] + sx [H / 128, T], u8 [P, I] + su [I / 128, P]
// (row p of u is pair p = t * top_k + j). launch_moe puts this region at the
// start of MoeArgs::scratch.
struct MoeFp8Scratch {
  uint8_t* x8;
  float* sx;
  uint8_t* u8;
  float* su;
};
MoeFp8Scratch moe_fp8_carve(void* scratch, int64_t T, int top_k, int64_t hidden, int64_t intermediate);

}  // namespace m2::cuda
