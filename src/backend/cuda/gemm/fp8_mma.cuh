// Device core of the FP8 block-scaled tensor-core GEMMs (fp8_gemm.cu: dense
// prefill; moe_fp8.cu: grouped MoE experts): a tile loop of mma.sync
// m16n8k32 e4m3 x e4m3 -> f32 fed by a cp.async multi-stage pipeline, on
// activations quantised per token group (fp8_quant.cuh). Only .cu files
// include this.
//
// Operands. A: activation rows, e4m3 codes with one fp32 scale per row per
// 128 columns, scales stored k-block-major (sA[kb * lds + row]: a tile's
// scales of one k-block are contiguous; cuBLASLt's VEC128_32F layout too).
// B: weight rows [N, K] e4m3 with 128 x 128 block scales (DeviceWeight).
// One pipeline stage is one 128-wide k-block: its 4 k32 mma steps accumulate
// in fp32 registers from zero, then the block's sum is folded into the
// result scaled by sA[kb, row] * sW[n / 128, kb] (DeepGEMM's way: the tensor
// core never sums across scale blocks).
//
// mma.m16n8k32 fragments (PTX ISA, "Matrix Fragments for mma.m16n8k32",
// 8-bit types; g = lane / 4, t = lane % 4; 4 bytes per register, k ascending):
//   A 16 x 32 row: a0 row g k 4t..4t+3, a1 row g+8 k 4t.., a2 row g k 16+4t..,
//                  a3 row g+8 k 16+4t..
//   B 32 x 8 col:  b0 col g k 4t..4t+3, b1 col g k 16+4t..
//   C 16 x 8 f32:  c0, c1 row g cols 2t, 2t+1; c2, c3 row g+8 cols 2t, 2t+1
// ldmatrix.m8n8.x4.b16 gives register q of lane L = row L/4, bytes
// 4(L%4)..+3 of the 8 x 16-byte matrix whose row addresses lanes 8q..8q+7
// supply: matrices (rows 0-7 | 8-15) x (k 0-15 | 16-31) are a0..a3 above, and
// for B (weight rows = n) matrices (n-tile j: k 0-15, k 16-31; n-tile j+1: ...)
// are b0, b1 of two n-tiles.
//
// Shared memory: a stage holds rows of 128 bytes (A rows, then B rows), the
// 16-byte chunk c of row r at chunk c ^ (r % 8), so that the 8 rows an
// ldmatrix phase reads hit 8 different bank groups; then the stage's scales.
#pragma once

#include <cuda_fp8.h>

#include "backend/cuda/runtime/async_copy.cuh"
#include "backend/cuda/gemm/bf16_mma.cuh"
#include "backend/cuda/runtime/common.cuh"
#include "backend/cuda/gemm/fp8_quant.cuh"

namespace m2::cuda {

constexpr int kKBlock = 128;  // k per stage = FP8 scale block = bytes per smem row

// ---- PTX wrappers (cp.async: async_copy.cuh; ldmatrix: bf16_mma.cuh) -------------

// d += A (16 x 32 e4m3) · B (32 x 8 e4m3), fp32. FP8 mma.sync exists from
// sm_89: code built for older GPUs traps instead, and the backend never
// launches the FP8 kernels there (device_caps.h).
__device__ inline void mma_e4m3(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 890
  __trap();
#else
  asm volatile(
      "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#endif
}

// Byte offset of 16-byte chunk `chunk` (0..7) of smem tile row `row`.
__device__ inline int swizzled(int row, int chunk) { return row * kKBlock + ((chunk ^ (row & 7)) << 4); }

// ---- the tile loop -----------------------------------------------------------------

// A block computes BM activation rows x BN output columns (BN 128, or 32 or
// 64 within one 128-wide scale block: more blocks for products of few rows).
// B holds SPLIT groups of BN weight rows (SPLIT = 2: the gate and up rows of
// the same columns, for the SwiGLU epilogue). Warps: WARPS_M x BN / 32; warp
// (wm, wn) owns rows wm * WM .. + WM and, in every group, columns wn * 32 ..
// + 32. Every configuration computes an output element the same way (its
// k-blocks in order, 4 k32 mma steps each folded with its scales), so the
// tile shape does not change a result's bits.
template <int BM_, int SPLIT_, int WARPS_M_, int STAGES_, int BN_ = 128>
struct Fp8Tile {
  static constexpr int BM = BM_, SPLIT = SPLIT_, WARPS_M = WARPS_M_, STAGES = STAGES_, BN = BN_;
  static constexpr int kWarpsN = BN / 32;
  static constexpr int kThreads = WARPS_M * kWarpsN * kWarp;
  static constexpr int kBRows = BN * SPLIT;
  static constexpr int kRows = BM + kBRows;  // smem rows per stage
  static constexpr int WM = BM / WARPS_M;
  static constexpr int MT = WM / 16;         // m16 tiles per warp
  static constexpr int kColsPerWarp = 32;
  static constexpr int NTG = kColsPerWarp / 8;  // n8 tiles per warp per group
  static constexpr int NT = NTG * SPLIT;
  static constexpr int kLoads = kRows * 8 / kThreads;  // 16-byte chunks per thread per stage
  static constexpr int kALoads = BM * 8 / kThreads;    // of which A rows
  static constexpr int kScaleBytes = (BM + SPLIT + 3) / 4 * 16;
  static constexpr int kStageBytes = kRows * kKBlock + kScaleBytes;
  static constexpr int kSmemBytes = STAGES * kStageBytes;
  static_assert(WM % 16 == 0 && NTG % 2 == 0, "warp tile");
  static_assert(kRows * 8 % kThreads == 0 && BM * 8 % kThreads == 0, "loader: whole rows per pass");
  static_assert(BM <= kThreads && BM + SPLIT <= kThreads, "scale loader: one scale per thread");
  static_assert(kStageBytes % 16 == 0, "stage alignment");
  static_assert(BN % 32 == 0 && 128 % BN == 0, "a block's columns within one scale block");
};

// The accumulators of one warp: acc[i][j][r] is (row, column) =
// (wm * WM + i * 16 + g + 8 * (r / 2), group j / NTG, wn * 32 + (j % NTG) * 8 + 2t + r % 2).
template <class Cfg>
using Fp8Acc = float[Cfg::MT][Cfg::NT][4];

// Runs the k loop of one block. a_src[i] / a_ok[i]: the global row (at k = 0)
// of A load i of this thread (tile row tid / 8 + i * kThreads / 8) and
// whether it exists; a_scale / a_scale_ok: this thread's A scale at kb = 0
// (threads tid < BM: tile row tid), advancing by a_scale_ld per k-block;
// b_row(r): weight row r of the block's B rows (at k = 0); w_scale[g]: the
// scale row of group g (at kb = 0, advancing by 1 per k-block).
template <class Cfg, class BRow>
__device__ void fp8_tile_loop(uint8_t* smem, int num_kb, const uint8_t* const (&a_src)[Cfg::kALoads],
                              const bool (&a_ok)[Cfg::kALoads], const float* a_scale, bool a_scale_ok,
                              int64_t a_scale_ld, BRow b_row, const float* const (&w_scale)[Cfg::SPLIT],
                              Fp8Acc<Cfg>& acc) {
  const int tid = threadIdx.x, lane = tid % kWarp, warp = tid / kWarp;
  const int wm = warp / Cfg::kWarpsN, wn = warp % Cfg::kWarpsN;
  const int chunk = tid % 8, row0 = tid / 8;
  constexpr int kRowsPerPass = Cfg::kThreads / 8;

  const uint8_t* b_src[Cfg::kLoads - Cfg::kALoads];
#pragma unroll
  for (int i = Cfg::kALoads; i < Cfg::kLoads; ++i) b_src[i - Cfg::kALoads] = b_row(row0 + i * kRowsPerPass - Cfg::BM);

  auto load_stage = [&](int kb) {
    uint8_t* st = smem + (kb % Cfg::STAGES) * Cfg::kStageBytes;
    const int64_t koff = static_cast<int64_t>(kb) * kKBlock + chunk * 16;
#pragma unroll
    for (int i = 0; i < Cfg::kALoads; ++i) {
      const int r = row0 + i * kRowsPerPass;
      cp_async16(st + swizzled(r, chunk), a_src[i] + (a_ok[i] ? koff : 0), a_ok[i]);
    }
#pragma unroll
    for (int i = Cfg::kALoads; i < Cfg::kLoads; ++i) {
      const int r = row0 + i * kRowsPerPass;
      cp_async16(st + swizzled(r, chunk), b_src[i - Cfg::kALoads] + koff, true);
    }
    float* sc = reinterpret_cast<float*>(st + Cfg::kRows * kKBlock);
    if (tid < Cfg::BM) cp_async4(sc + tid, a_scale + (a_scale_ok ? kb * a_scale_ld : 0), a_scale_ok);
    if (tid >= Cfg::BM && tid < Cfg::BM + Cfg::SPLIT) cp_async4(sc + tid, w_scale[tid - Cfg::BM] + kb, true);
  };

#pragma unroll
  for (int i = 0; i < Cfg::MT; ++i)
#pragma unroll
    for (int j = 0; j < Cfg::NT; ++j)
#pragma unroll
      for (int r = 0; r < 4; ++r) acc[i][j][r] = 0.0f;

#pragma unroll
  for (int s = 0; s < Cfg::STAGES - 1; ++s) {
    if (s < num_kb) load_stage(s);
    cp_async_commit();  // empty groups keep the count uniform
  }
  const int q = lane / 8, lr = lane % 8;  // ldmatrix: matrix q, row lr of it
  for (int kb = 0; kb < num_kb; ++kb) {
    cp_async_wait<Cfg::STAGES - 2>();  // stage kb has landed (this thread's copies) ...
    __syncthreads();                   // ... everyone's, and stage kb - 1 is free
    if (kb + Cfg::STAGES - 1 < num_kb) load_stage(kb + Cfg::STAGES - 1);
    cp_async_commit();

    const uint8_t* st = smem + (kb % Cfg::STAGES) * Cfg::kStageBytes;
    float part[Cfg::MT][Cfg::NT][4];
#pragma unroll
    for (int i = 0; i < Cfg::MT; ++i)
#pragma unroll
      for (int j = 0; j < Cfg::NT; ++j)
#pragma unroll
        for (int r = 0; r < 4; ++r) part[i][j][r] = 0.0f;
#pragma unroll
    for (int ks = 0; ks < kKBlock / 32; ++ks) {
      uint32_t a[Cfg::MT][4];
#pragma unroll
      for (int i = 0; i < Cfg::MT; ++i) {
        const int r = wm * Cfg::WM + i * 16 + (q & 1) * 8 + lr;
        ldmatrix_x4(a[i], smem_addr(st + swizzled(r, ks * 2 + (q >> 1))));
      }
      uint32_t b[Cfg::NT][2];
#pragma unroll
      for (int j = 0; j < Cfg::NT; j += 2) {
        const int r = Cfg::BM + (j / Cfg::NTG) * Cfg::BN + wn * Cfg::kColsPerWarp + (j % Cfg::NTG) * 8 + (q >> 1) * 8 + lr;
        uint32_t v[4];
        ldmatrix_x4(v, smem_addr(st + swizzled(r, ks * 2 + (q & 1))));
        b[j][0] = v[0], b[j][1] = v[1], b[j + 1][0] = v[2], b[j + 1][1] = v[3];
      }
#pragma unroll
      for (int i = 0; i < Cfg::MT; ++i)
#pragma unroll
        for (int j = 0; j < Cfg::NT; ++j) mma_e4m3(part[i][j], a[i], b[j][0], b[j][1]);
    }
    // Fold the k-block in: acc += part * sA[row] * sW[group].
    const float* sc = reinterpret_cast<const float*>(st + Cfg::kRows * kKBlock);
    const int g = lane / 4;
#pragma unroll
    for (int i = 0; i < Cfg::MT; ++i)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const float sa = sc[wm * Cfg::WM + i * 16 + g + 8 * h];
#pragma unroll
        for (int j = 0; j < Cfg::NT; ++j) {
          const float s = sa * sc[Cfg::BM + j / Cfg::NTG];
          acc[i][j][2 * h] = fmaf(part[i][j][2 * h], s, acc[i][j][2 * h]);
          acc[i][j][2 * h + 1] = fmaf(part[i][j][2 * h + 1], s, acc[i][j][2 * h + 1]);
        }
      }
  }
  cp_async_wait<0>();
  __syncthreads();  // the caller may reuse smem
}

}  // namespace m2::cuda
