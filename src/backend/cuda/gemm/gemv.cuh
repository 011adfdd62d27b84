// The memory-bound core of every few-token product (dense decode matmul, the
// router, the MoE experts): weight rows streamed once with 16-byte loads and
// decoded in registers, activation rows staged in shared memory, fp32
// accumulation.
//
// L threads ("lanes", 32 per warp, G warps cooperating) share each weight
// row. Lane q reads the 16-byte chunks c = i * L + q (i = 0..KI-1) of the
// row, each holding V = Stored<T>::kPer16 consecutive columns. The activation
// values a lane needs for its chunk are staged so that a quarter-warp reads
// 8 consecutive float4 (no bank conflicts): float4 j of chunk c of row t is
// xs[t * row_stride + (i * V/4 + j) * L + q].
//
// Each output is a fixed-order function of its own row and token only (the
// lane partition and the shuffle tree do not depend on the batch), so a
// token's result does not depend on which other tokens share the launch.
#pragma once

#include "backend/cuda/runtime/common.cuh"
#include "backend/cuda/runtime/device_types.h"

namespace m2::cuda {

struct XLayout {
  int L = 0;   // lanes per weight row
  int KI = 0;  // chunks per lane
  int V4 = 0;  // float4 per chunk
  __device__ int row_stride() const { return KI * V4 * L; }  // float4 per staged row
};

template <DType T>
__host__ __device__ inline XLayout make_layout(int64_t K, int lanes) {
  constexpr int V = Stored<T>::kPer16;
  return XLayout{lanes, static_cast<int>(ceil_div(K / V, lanes)), V / 4};
}

// float4 per staged activation row (host: shared memory sizing).
template <DType T>
inline size_t staged_row_float4(int64_t K, int lanes) {
  const XLayout l = make_layout<T>(K, lanes);
  return static_cast<size_t>(l.KI) * l.V4 * l.L;
}

// The first column of float4 `rem` of a staged row (rem < row_stride()).
template <DType T>
__device__ inline int64_t staged_col(const XLayout& lay, int rem) {
  const int q = rem % lay.L, ij = rem / lay.L;
  return (static_cast<int64_t>(ij / lay.V4) * lay.L + q) * Stored<T>::kPer16 + 4 * (ij % lay.V4);
}

// Stages rows t < n_rows (row t at row_ptr(t), K floats, 16-byte aligned).
// Each thread issues kBatch loads before it stores any: a store to shared
// memory between two loads (the compiler cannot tell the generic source from
// shared memory) would cost one round trip per element, ~0.5 us each.
template <DType T, class RowPtr>
__device__ void stage_rows(float4* xs, const XLayout& lay, int n_rows, int64_t K, RowPtr row_ptr) {
  constexpr int kBatch = 8;
  const int per_row = lay.KI * lay.V4 * lay.L;
  const int total = n_rows * per_row;
  for (int base = 0; base < total; base += kBatch * blockDim.x) {
    float4 v[kBatch];
#pragma unroll
    for (int b = 0; b < kBatch; ++b) {
      const int idx = base + b * blockDim.x + threadIdx.x;
      v[b] = make_float4(0.f, 0.f, 0.f, 0.f);
      if (idx < total) {
        const int64_t col = staged_col<T>(lay, idx % per_row);
        if (col < K) v[b] = *reinterpret_cast<const float4*>(row_ptr(idx / per_row) + col);
      }
    }
#pragma unroll
    for (int b = 0; b < kBatch; ++b) {
      const int idx = base + b * blockDim.x + threadIdx.x;
      if (idx < total) xs[idx] = v[b];
    }
  }
}

__device__ inline uint32_t word(const uint4& v, int i) { return i == 0 ? v.x : i == 1 ? v.y : i == 2 ? v.z : v.w; }

// Values 4j..4j+3 of a 16-byte chunk (j a compile-time constant after unrolling).
template <DType T>
__device__ inline float4 decode4(const uint4& v, int j) {
  if constexpr (T == DType::kF8E4M3) {
    const uint32_t w = word(v, j);
    const float2 lo = __half22float2(__half2(__nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(w), __NV_E4M3)));
    const float2 hi =
        __half22float2(__half2(__nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(w >> 16), __NV_E4M3)));
    return make_float4(lo.x, lo.y, hi.x, hi.y);
  } else if constexpr (T == DType::kBF16) {
    const uint32_t a = word(v, 2 * j), b = word(v, 2 * j + 1);
    return make_float4(__uint_as_float(a << 16), __uint_as_float(a & 0xffff0000u), __uint_as_float(b << 16),
                       __uint_as_float(b & 0xffff0000u));
  } else if constexpr (T == DType::kF16) {
    const uint32_t a = word(v, 2 * j), b = word(v, 2 * j + 1);
    const float2 fa = __half22float2(*reinterpret_cast<const __half2*>(&a));
    const float2 fb = __half22float2(*reinterpret_cast<const __half2*>(&b));
    return make_float4(fa.x, fa.y, fb.x, fb.y);
  } else {
    return make_float4(__uint_as_float(v.x), __uint_as_float(v.y), __uint_as_float(v.z), __uint_as_float(v.w));
  }
}

__device__ inline float dot4(const float4& a, const float4& b, float acc) {
  return fmaf(a.w, b.w, fmaf(a.z, b.z, fmaf(a.y, b.y, fmaf(a.x, b.x, acc))));
}

// acc[m][r][t] += this lane's share of W_m[n + r, :] · x_t for the NM
// matrices W_m (same shape; e.g. an expert's W1 and W3), r < R, t < T <= TM
// (rows past the matrices' rows contribute nothing). U chunks of every row
// are loaded before any is used. One token, one matrix (the batch-1 GEMV):
// double buffered in registers, the next U chunks issued before the current
// ones are used (measured on an H200: o_proj 15.4 -> 13.9 us, expert w1 8.1 ->
// 6.9). Elsewhere the second buffer's registers cost more occupancy than it
// gains (q_proj at 4 tokens 21 -> 31 us, the MoE's W1|W3 pass 53 -> 56 us).
template <DType WT, int TM, int R, int NM>
__device__ void dot_rows_n(const DeviceWeight* w, int64_t n, const float4* xs, const XLayout& lay, int q, int T,
                           float (&acc)[NM][R][TM]) {
  constexpr int V = Stored<WT>::kPer16;
  constexpr int U = 2;
  constexpr bool kDoubleBuffer = TM == 1 && NM == 1;
  const int64_t KC = w[0].cols / V, rows = w[0].rows;  // chunks per row
  const int stride = lay.row_stride();
  using Group = uint4[U][NM][R];
  auto issue = [&](Group& g, int i0) {
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int64_t c = static_cast<int64_t>(i0 + u) * lay.L + q;
#pragma unroll
      for (int m = 0; m < NM; ++m)
#pragma unroll
        for (int r = 0; r < R; ++r)
          g[u][m][r] = (c < KC && n + r < rows) ? load_stream(w[m].data + ((n + r) * KC + c) * 16) : make_uint4(0, 0, 0, 0);
    }
  };
  auto use = [&](const Group& g, int i0) {
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int i = i0 + u;
      const int64_t c = static_cast<int64_t>(i) * lay.L + q;
      if (c >= KC) continue;
#pragma unroll
      for (int m = 0; m < NM; ++m) {
        float part[R][TM];
#pragma unroll
        for (int r = 0; r < R; ++r)
#pragma unroll
          for (int t = 0; t < TM; ++t) part[r][t] = 0.0f;
#pragma unroll
        for (int j = 0; j < V / 4; ++j) {
          float4 wf[R];
#pragma unroll
          for (int r = 0; r < R; ++r) wf[r] = decode4<WT>(g[u][m][r], j);
#pragma unroll
          for (int t = 0; t < TM; ++t) {
            if (t >= T) break;
            const float4 xv = xs[t * stride + (i * (V / 4) + j) * lay.L + q];
#pragma unroll
            for (int r = 0; r < R; ++r) part[r][t] = dot4(xv, wf[r], part[r][t]);
          }
        }
#pragma unroll
        for (int r = 0; r < R; ++r) {
          float sc = 1.0f;
          if constexpr (WT == DType::kF8E4M3) {
            if (n + r < rows) sc = w[m].scales[((n + r) / kScaleBlock) * w[m].scale_ld + (c * V) / kScaleBlock];
          }
#pragma unroll
          for (int t = 0; t < TM; ++t) acc[m][r][t] = fmaf(part[r][t], sc, acc[m][r][t]);
        }
      }
    }
  };
  Group a;
  if constexpr (!kDoubleBuffer) {
    for (int i0 = 0; i0 < lay.KI; i0 += U) {
      issue(a, i0);
      use(a, i0);
    }
  } else {
    Group b;  // two named buffers: registers cannot be indexed by a runtime stage
    issue(a, 0);
    for (int i0 = 0; i0 < lay.KI; i0 += 2 * U) {
      if (i0 + U < lay.KI) issue(b, i0 + U);
      use(a, i0);
      if (i0 + U >= lay.KI) break;
      if (i0 + 2 * U < lay.KI) issue(a, i0 + 2 * U);
      use(b, i0 + U);
    }
  }
}

// One matrix.
template <DType WT, int TM, int R>
__device__ void dot_rows(const DeviceWeight& w, int64_t n, const float4* xs, const XLayout& lay, int q, int T,
                         float (&acc)[R][TM]) {
  float acc1[1][R][TM];
#pragma unroll
  for (int r = 0; r < R; ++r)
#pragma unroll
    for (int t = 0; t < TM; ++t) acc1[0][r][t] = acc[r][t];
  dot_rows_n<WT, TM, R, 1>(&w, n, xs, lay, q, T, acc1);
#pragma unroll
  for (int r = 0; r < R; ++r)
#pragma unroll
    for (int t = 0; t < TM; ++t) acc[r][t] = acc1[0][r][t];
}

// Asks L2 for rows [first, first + count) of w (clipped to its rows): what a
// block launched early (launch_pdl) will stream once the kernel before it is done.
template <DType WT>
__device__ inline void prefetch_rows_l2(const DeviceWeight& w, int64_t first, int64_t count) {
  if (first >= w.rows) return;
  const int64_t row_bytes = w.cols * static_cast<int64_t>(16 / Stored<WT>::kPer16);
  prefetch_l2(w.data + first * row_bytes, static_cast<uint32_t>(min(count, w.rows - first) * row_bytes));
}

// Whether the GEMV core can read this weight: whole 16-byte chunks per row,
// FP8 scale blocks made of whole chunks.
inline bool gemv_compatible(const DeviceWeight& w) {
  const int64_t bytes = w.cols * static_cast<int64_t>(dtype_size(w.dtype));
  return bytes % 16 == 0 && reinterpret_cast<uintptr_t>(w.data) % 16 == 0;
}

}  // namespace m2::cuda
