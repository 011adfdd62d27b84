// Kernel bodies shared by every ISA. Included once per ISA translation unit
// with a vector policy `V` providing:
//   F, W (lanes), kMaxTT (token rows per register tile), kPanelTT (the same
//   for the prefill panel's tile, matmul_blocked), kFp8Mul,
//   zero, set1, load, store, fma (a*b+c), mul, add, reduce (horizontal sum),
//   load_bf16, load_f16, load_fp8 (value / kFp8Mul), store_bf16 (RNE).
// Only include from kernels_<isa>.cpp, inside that file's own namespace,
// after <algorithm>, <cmath>, <vector> and backend/cpu/kernels.h.

// The stored element type of weights/caches is a template parameter of the
// inner loops (dispatched once per call), so they compile to straight-line
// conversions without per-element branches.
template <DType T>
struct Elem;
template <>
struct Elem<DType::kF32> { using type = float; };
template <>
struct Elem<DType::kBF16> { using type = uint16_t; };
template <>
struct Elem<DType::kF16> { using type = uint16_t; };
template <>
struct Elem<DType::kF8E4M3> { using type = uint8_t; };

// W stored elements at p -> fp32 (FP8: value / V::kFp8Mul).
template <class V, DType T>
inline typename V::F load_weight(const typename Elem<T>::type* p) {
  if constexpr (T == DType::kBF16) return V::load_bf16(p);
  else if constexpr (T == DType::kF16) return V::load_f16(p);
  else if constexpr (T == DType::kF8E4M3) return V::load_fp8(p);
  else return V::load(p);
}

template <DType T>
inline float load_weight_scalar(const typename Elem<T>::type* p) {
  if constexpr (T == DType::kBF16) return bf16_to_f32(*p);
  else if constexpr (T == DType::kF16) return f16_to_f32(*p);
  else if constexpr (T == DType::kF8E4M3) return f8e4m3_to_f32(*p);
  else return *p;
}

// Calls f.template operator()<T>() for the float dtype t.
template <class Fn>
inline auto dispatch_dtype(DType t, Fn&& f) {
  switch (t) {
    case DType::kBF16: return f.template operator()<DType::kBF16>();
    case DType::kF16: return f.template operator()<DType::kF16>();
    case DType::kF8E4M3: return f.template operator()<DType::kF8E4M3>();
    default: return f.template operator()<DType::kF32>();
  }
}

// Column blocks over which one scale applies: FP8 blocks, else all of K.
template <DType T>
inline int64_t col_block(const WeightRef& w, int64_t K) {
  return T == DType::kF8E4M3 ? w.block_cols : K;
}

// Scale of (row, column block) as a multiplier of what load_fp8 returns.
template <class V, DType T>
inline float row_scale(const WeightRef& w, int64_t row, int64_t kb) {
  if constexpr (T != DType::kF8E4M3) return 1.0f;
  return w.scales[(row / w.block_rows) * w.scale_ld + kb / w.block_cols] * V::kFp8Mul;
}

// One stored element as the vector loads scale it (FP8: value / V::kFp8Mul,
// exact: a power of two).
template <class V, DType T>
inline float weight_scalar(const typename Elem<T>::type* p) {
  if constexpr (T == DType::kF8E4M3) return load_weight_scalar<T>(p) * (1.0f / V::kFp8Mul);
  else return load_weight_scalar<T>(p);
}

// Whether FP8 rows are read 4 vectors' worth of weights at a time
// (V::load_fp8x4: 4 x W weights in the policy's lane order; where that is
// not k's own order, V::permute_x stores x in it): where the policy has it
// and K and the scale blocks are multiples of 4 x W. Every path of a weight
// (decode, panel) then reads the same order, so a row's arithmetic stays the
// same at every batch size.
template <class V, DType T>
constexpr bool kHasFp8x4 = T == DType::kF8E4M3 && requires(const uint8_t* p, typename V::F* o) { V::load_fp8x4(p, o); };
template <class V>
constexpr bool kPermutesX = requires(const float* x, typename V::F s, float* o) { V::permute_x(x, s, o); };
template <class V, DType T>
inline bool fp8_grouped(const WeightRef& w, int64_t K) {
  if constexpr (kHasFp8x4<V, T>) return K % (4 * V::W) == 0 && w.block_cols % (4 * V::W) == 0;
  return false;
}

// Rows [n, n+R), columns [k0, k1) of K, decoded into panel [R, k1 - k0]
// fp32 (rows `ldp` apart, column k0 first): exactly the values the fused
// path computes in registers (FP8: unscaled, value / V::kFp8Mul). k0 and k1
// are multiples of 4 x W where the rows are read grouped (fp8_grouped).
// With `ahead` > 0 each row's next `ahead` elements past k1 are prefetched
// (the slice the caller decodes next: slices of many rows at once are more
// streams than the hardware prefetchers follow).
template <class V, DType T, int R>
void decode_panel(const WeightRef& w, int64_t n, int64_t K, int64_t k0, int64_t k1, float* panel, int64_t ldp,
                  int64_t ahead = 0) {
  const auto* data = static_cast<const typename Elem<T>::type*>(w.data);
  const int64_t pf_end = std::min(K, k1 + ahead);
  for (int r = 0; r < R; ++r)
    for (int64_t k = k1; k < pf_end; k += 64 / static_cast<int64_t>(sizeof(*data)))
      __builtin_prefetch(data + (n + r) * w.ld + k);
  if constexpr (kHasFp8x4<V, T>) {
    if (fp8_grouped<V, T>(w, K)) {
      for (int r = 0; r < R; ++r)
        for (int64_t k = k0; k < k1; k += 4 * V::W) {
          typename V::F v[4];
          V::load_fp8x4(data + (n + r) * w.ld + k, v);
          for (int j = 0; j < 4; ++j) V::store(panel + r * ldp + (k - k0) + V::W * j, v[j]);
        }
      return;
    }
  }
  for (int r = 0; r < R; ++r) {
    const int64_t row = n + r;
    int64_t k = k0;
    for (; k + V::W <= k1; k += V::W) V::store(panel + r * ldp + (k - k0), load_weight<V, T>(data + row * w.ld + k));
    for (; k < k1; ++k) panel[r * ldp + (k - k0)] = weight_scalar<V, T>(data + row * w.ld + k);
  }
}

constexpr int64_t kPrefetchBytes = 512;

// n floats of a thread's scratch `v`, starting on a cache line (a vector load
// that spans two lines costs two).
inline float* line_aligned(std::vector<float>& v, size_t n) {
  v.resize(n + 64 / sizeof(float));
  const auto p = reinterpret_cast<uintptr_t>(v.data());
  return reinterpret_cast<float*>((p + 63) & ~static_cast<uintptr_t>(63));
}

// Register tile: TT token rows x R weight rows over all of K: y = x · Wᵀ with
// the weights as load_weight returns them. With `panel` the weights come
// pre-decoded, else they are decoded on the fly; both give bit-identical
// results. (FP8 rows come here with x already multiplied by their block
// scales: matmul_typed.)
template <class V, DType T, int TT, int R, bool kPanel>
inline void tile(const float* x, int64_t ldx, int64_t K, const WeightRef& w, int64_t n, const float* panel, float* y,
                 int64_t ldy) {
  using F = typename V::F;
  const auto* data = static_cast<const typename Elem<T>::type*>(w.data);
  F acc[TT][R];
  float tail[TT][R];
  for (int t = 0; t < TT; ++t)
    for (int r = 0; r < R; ++r) acc[t][r] = V::zero(), tail[t][r] = 0.0f;
  if constexpr (!kPanel && kHasFp8x4<V, T>) {
    if (fp8_grouped<V, T>(w, K)) {  // 4 x W weights of a row at a time, x in their lane order
      for (int64_t k = 0; k < K; k += 4 * V::W) {
        for (int r = 0; r < R; ++r) {
          const auto* p = data + (n + r) * w.ld + k;
          if (TT <= 2) __builtin_prefetch(reinterpret_cast<const char*>(p) + kPrefetchBytes);
          F wv[4];
          V::load_fp8x4(p, wv);
          for (int j = 0; j < 4; ++j)
            for (int t = 0; t < TT; ++t) acc[t][r] = V::fma(V::load(x + t * ldx + k + V::W * j), wv[j], acc[t][r]);
        }
      }
      for (int t = 0; t < TT; ++t)
        for (int r = 0; r < R; ++r) y[t * ldy + n + r] = V::reduce(acc[t][r]) + tail[t][r];
      return;
    }
  }
  const int64_t KB = col_block<T>(w, K);
  for (int64_t kb = 0; kb < K; kb += KB) {
    const int64_t ke = std::min(K, kb + KB);
    int64_t k = kb;
    for (; k + V::W <= ke; k += V::W) {
      F wv[R];
      for (int r = 0; r < R; ++r) {
        if constexpr (kPanel) {
          wv[r] = V::load(panel + r * K + k);
        } else {
          const auto* p = data + (n + r) * w.ld + k;
          // Decode streams weights from memory once: ask for the lines
          // kPrefetchBytes ahead, so that each core keeps enough misses in
          // flight (one core's demand misses alone reach ~5 GB/s).
          if (TT <= 2 && (reinterpret_cast<uintptr_t>(p) & 63) < sizeof(*p) * V::W)
            __builtin_prefetch(reinterpret_cast<const char*>(p) + kPrefetchBytes);
          wv[r] = load_weight<V, T>(p);
        }
      }
      for (int t = 0; t < TT; ++t) {
        const F xv = V::load(x + t * ldx + k);
        for (int r = 0; r < R; ++r) acc[t][r] = V::fma(xv, wv[r], acc[t][r]);
      }
    }
    for (; k < ke; ++k) {
      for (int r = 0; r < R; ++r) {
        const float wr = kPanel ? panel[r * K + k] : weight_scalar<V, T>(data + (n + r) * w.ld + k);
        for (int t = 0; t < TT; ++t) tail[t][r] = std::fma(x[t * ldx + k], wr, tail[t][r]);
      }
    }
  }
  for (int t = 0; t < TT; ++t)
    for (int r = 0; r < R; ++r) y[t * ldy + n + r] = V::reduce(acc[t][r]) + tail[t][r];
}

template <class V, DType T, int R, bool kPanel>
inline void tile_rows(const float* x, int64_t nt, int64_t ldx, int64_t K, const WeightRef& w, int64_t n,
                      const float* panel, float* y, int64_t ldy) {
  int64_t t = 0;
  for (; t + V::kMaxTT <= nt; t += V::kMaxTT)
    tile<V, T, V::kMaxTT, R, kPanel>(x + t * ldx, ldx, K, w, n, panel, y + t * ldy, ldy);
  for (; t < nt; ++t) tile<V, T, 1, R, kPanel>(x + t * ldx, ldx, K, w, n, panel, y + t * ldy, ldy);
}

// The panel tile of tile() over columns [k0, k1) only, its TT x R
// accumulators kept in `acc` between calls (token t's row r at
// acc[(t * ld_acc + r) * W]): a store and a reload of an fp32 vector change
// no bit, so running the K blocks in order gives tile()'s exact arithmetic.
template <class V, int TT, int R>
inline void tile_span(const float* x, int64_t ldx, const float* panel, int64_t ldp, int64_t k0, int64_t k1, float* acc,
                      int64_t ld_acc) {
  using F = typename V::F;
  F a[TT][R];
  for (int t = 0; t < TT; ++t)
    for (int r = 0; r < R; ++r) a[t][r] = V::load(acc + (t * ld_acc + r) * V::W);
  for (int64_t k = k0; k < k1; k += V::W) {
    F wv[R];
    for (int r = 0; r < R; ++r) wv[r] = V::load(panel + r * ldp + k);
    for (int t = 0; t < TT; ++t) {
      const F xv = V::load(x + t * ldx + k);
      for (int r = 0; r < R; ++r) a[t][r] = V::fma(xv, wv[r], a[t][r]);
    }
  }
  for (int t = 0; t < TT; ++t)
    for (int r = 0; r < R; ++r) V::store(acc + (t * ld_acc + r) * V::W, a[t][r]);
}

// Prefill: rows [n_begin, n_end) (a multiple of R of them) for tn tokens,
// K a multiple of W (no scalar tails), over column slices of kKBlock: the
// weights of kChunkRows rows are decoded one slice at a time into a panel
// that stays in L1 (16 rows x 256 fp32 = 16 KB, beside a token tile's x,
// within any L1; decoding whole rows, 12 KB each at K = 3072, wrote the
// panel to L2 and cost the MoE's ~16 tokens an expert a third of their FMA
// time; 512-column slices measured 10 % slower), every (token tile, R rows) pair runs
// over it, and the pairs' accumulators wait in a buffer from one slice to
// the next (a store and reload of an fp32 vector change no bit: tile()'s
// arithmetic). The panel's rows are padded by one cache line so that they
// do not fall in the same L1 sets (so must x's be: matmul_typed pads its
// scaled copy).
template <class V, DType T, int R>
void matmul_blocked(const float* x, int64_t tn, int64_t ldx, int64_t K, const WeightRef& w, int64_t n_begin,
                    int64_t n_end, float* y, int64_t ldy) {
  constexpr int64_t kChunkRows = 4 * R, kKBlock = 256, kTT = V::kPanelTT;
  constexpr int64_t ldp = kKBlock + 64 / static_cast<int64_t>(sizeof(float));
  thread_local std::vector<float> panel_buf, acc_buf;
  float* panel = line_aligned(panel_buf, static_cast<size_t>(kChunkRows * ldp));
  float* acc = line_aligned(acc_buf, static_cast<size_t>(tn * kChunkRows * V::W));
  for (int64_t n = n_begin; n < n_end; n += kChunkRows) {
    const int64_t rows = std::min(kChunkRows, n_end - n);
    std::fill(acc, acc + tn * kChunkRows * V::W, 0.0f);
    for (int64_t k0 = 0; k0 < K; k0 += kKBlock) {
      const int64_t k1 = std::min(K, k0 + kKBlock);
      for (int64_t r = 0; r < rows; r += R) decode_panel<V, T, R>(w, n + r, K, k0, k1, panel + r * ldp, ldp, kKBlock);
      auto span = [&]<int TT>(int64_t t) {  // (x from column k0, as the panel)
        for (int64_t r = 0; r < rows; r += R)
          tile_span<V, TT, R>(x + t * ldx + k0, ldx, panel + r * ldp, ldp, 0, k1 - k0,
                              acc + (t * kChunkRows + r) * V::W, kChunkRows);
      };
      int64_t t = 0;
      for (; t + kTT <= tn; t += kTT) span.template operator()<kTT>(t);
      for (; t + 2 <= tn; t += 2) span.template operator()<2>(t);
      if (t < tn) span.template operator()<1>(t);
    }
    for (int64_t t = 0; t < tn; ++t)
      for (int64_t r = 0; r < rows; ++r)  // + 0.0f: tile()'s empty scalar tail
        y[t * ldy + n + r] = V::reduce(V::load(acc + (t * kChunkRows + r) * V::W)) + 0.0f;
  }
}

// Rows [n_begin, n_end) of y = x · Wᵀ for tokens [0, nt), with x as given.
template <class V, DType T>
void matmul_rows(const float* x, int64_t nt, int64_t ldx, int64_t K, const WeightRef& w, int64_t n_begin,
                 int64_t n_end, float* y, int64_t ldy) {
  constexpr int R = 4;
  // Few tokens: stream the weights once, decoding in registers (decode path).
  if (nt <= V::kMaxTT) {
    int64_t n = n_begin;
    for (; n + R <= n_end; n += R) tile_rows<V, T, R, false>(x, nt, ldx, K, w, n, nullptr, y, ldy);
    for (; n < n_end; ++n) tile_rows<V, T, 1, false>(x, nt, ldx, K, w, n, nullptr, y, ldy);
    return;
  }
  // Many tokens: decode an R-row panel once per block of tokens, reuse it;
  // blocked over K where there are no scalar tails (every M2 shape).
  constexpr int64_t kTokenBlock = 64;
  const bool blocked = K % V::W == 0 && (T != DType::kF8E4M3 || w.block_cols % V::W == 0);
  const int64_t n_split = blocked ? n_begin + (n_end - n_begin) / R * R : n_begin;
  thread_local std::vector<float> panel_buf;
  float* panel = line_aligned(panel_buf, static_cast<size_t>(R * K));
  for (int64_t tb = 0; tb < nt; tb += kTokenBlock) {
    const int64_t tn = std::min(kTokenBlock, nt - tb);
    if (blocked) matmul_blocked<V, T, R>(x + tb * ldx, tn, ldx, K, w, n_begin, n_split, y + tb * ldy, ldy);
    int64_t n = n_split;
    for (; n + R <= n_end; n += R) {
      decode_panel<V, T, R>(w, n, K, 0, K, panel, K);
      tile_rows<V, T, R, true>(x + tb * ldx, tn, ldx, K, w, n, panel, y + tb * ldy, ldy);
    }
    for (; n < n_end; ++n) {
      decode_panel<V, T, 1>(w, n, K, 0, K, panel, K);
      tile_rows<V, T, 1, true>(x + tb * ldx, tn, ldx, K, w, n, panel, y + tb * ldy, ldy);
    }
  }
}

// FP8: W = W8 x scales[row block, column block], so for the rows of one
// scale block y = (x ⊙ s) · W8ᵀ with s the block's scales spread over the
// columns: x is multiplied by them once per row block (xs) and the tiles run
// plain FMAs on the weights as decoded. The same for every token count, so a
// row's arithmetic does not depend on the batch.
template <class V, DType T>
void matmul_typed(const float* x, int64_t nt, int64_t ldx, int64_t K, const WeightRef& w, int64_t n_begin,
                  int64_t n_end, float* y, int64_t ldy) {
  if constexpr (T != DType::kF8E4M3) {
    matmul_rows<V, T>(x, nt, ldx, K, w, n_begin, n_end, y, ldy);
  } else {
    thread_local std::vector<float> xs_buf;
    constexpr int64_t kTokenBlock = 64;  // rows of xs at a time (with x's and the panel, within L2)
    // Rows one cache line longer than K (L1 sets: matmul_blocked); in
    // load_fp8x4's lane order where the weights are read in it.
    const int64_t ldxs = K + 64 / static_cast<int64_t>(sizeof(float));
    const bool permute = kPermutesX<V> && fp8_grouped<V, T>(w, K);
    float* xs = line_aligned(xs_buf, static_cast<size_t>(std::min(nt, kTokenBlock) * ldxs));
    // Token blocks outside, so that a block of x stays in L2 over the row blocks.
    for (int64_t tb = 0; tb < nt; tb += kTokenBlock) {
      const int64_t tn = std::min(kTokenBlock, nt - tb);
      for (int64_t rb = n_begin; rb < n_end;) {
        const int64_t re = std::min(n_end, (rb / w.block_rows + 1) * w.block_rows);
        for (int64_t kb = 0; kb < K; kb += w.block_cols) {
          const int64_t ke = std::min(K, kb + w.block_cols);
          const float sc = row_scale<V, T>(w, rb, kb);
          const typename V::F s = V::set1(sc);
          for (int64_t t = 0; t < tn; ++t) {
            const float* xr = x + (tb + t) * ldx;
            float* o = xs + t * ldxs;
            int64_t k = kb;
            if constexpr (kPermutesX<V>) {
              if (permute)
                for (; k + 4 * V::W <= ke; k += 4 * V::W) V::permute_x(xr + k, s, o + k);
            }
            for (; k + V::W <= ke; k += V::W) V::store(o + k, V::mul(V::load(xr + k), s));
            for (; k < ke; ++k) o[k] = xr[k] * sc;
          }
        }
        matmul_rows<V, T>(xs, tn, ldxs, K, w, rb, re, y + tb * ldy, ldy);
        rb = re;
      }
    }
  }
}

template <class V>
void matmul_impl(const float* x, int64_t nt, int64_t ldx, int64_t K, const WeightRef& w, int64_t n_begin,
                 int64_t n_end, float* y, int64_t ldy) {
  dispatch_dtype(w.dtype, [&]<DType T>() { matmul_typed<V, T>(x, nt, ldx, K, w, n_begin, n_end, y, ldy); });
}

template <class V>
void to_f32_impl(DType t, const void* src, float* dst, int64_t n) {
  dispatch_dtype(t, [&]<DType T>() {
    const auto* s = static_cast<const typename Elem<T>::type*>(src);
    const typename V::F m = V::set1(V::kFp8Mul);
    int64_t i = 0;
    for (; i + V::W <= n; i += V::W) {
      typename V::F v = load_weight<V, T>(s + i);
      if constexpr (T == DType::kF8E4M3) v = V::mul(v, m);
      V::store(dst + i, v);
    }
    for (; i < n; ++i) dst[i] = load_weight_scalar<T>(s + i);
  });
}

template <class V>
void from_f32_impl(DType t, const float* src, void* dst, int64_t n) {
  int64_t i = 0;
  if (t == DType::kBF16) {
    uint16_t* d = static_cast<uint16_t*>(dst);
    for (; i + V::W <= n; i += V::W) V::store_bf16(d + i, V::load(src + i));
    for (; i < n; ++i) d[i] = f32_to_bf16(src[i]);
  } else if (t == DType::kF16) {
    uint16_t* d = static_cast<uint16_t*>(dst);
    for (; i < n; ++i) d[i] = f32_to_f16(src[i]);
  } else if (t == DType::kF8E4M3) {
    uint8_t* d = static_cast<uint8_t*>(dst);
    for (; i < n; ++i) d[i] = f32_to_f8e4m3(src[i]);
  } else {
    std::copy(src, src + n, static_cast<float*>(dst));
  }
}

template <class V>
void attn_scores_impl(const float* q, int G, int64_t hd, const void* k, DType kt, int64_t n, int64_t k_stride,
                      const float* ks, int64_t ks_stride, float scale, float* s, int64_t lds) {
  using F = typename V::F;
  dispatch_dtype(kt, [&]<DType T>() {
    const auto* kd = static_cast<const typename Elem<T>::type*>(k);
    constexpr int kMaxG = 16;
    for (int g0 = 0; g0 < G; g0 += kMaxG) {
      const int gn = std::min(kMaxG, G - g0);
      for (int64_t j = 0; j < n; ++j) {
        const auto* kj = kd + j * k_stride;
        F acc[kMaxG];
        float tail[kMaxG];
        for (int g = 0; g < gn; ++g) acc[g] = V::zero(), tail[g] = 0.0f;
        int64_t d = 0;
        for (; d + V::W <= hd; d += V::W) {
          const F kv = load_weight<V, T>(kj + d);
          for (int g = 0; g < gn; ++g) acc[g] = V::fma(V::load(q + (g0 + g) * hd + d), kv, acc[g]);
        }
        for (; d < hd; ++d) {
          const float kv = load_weight_scalar<T>(kj + d);
          for (int g = 0; g < gn; ++g) tail[g] = std::fma(q[(g0 + g) * hd + d], kv, tail[g]);
        }
        // FP8: vector lanes hold value / kFp8Mul, the scalar tail true values.
        float kscale = scale, tscale = scale;
        if constexpr (T == DType::kF8E4M3) kscale = scale * ks[j * ks_stride] * V::kFp8Mul, tscale = scale * ks[j * ks_stride];
        for (int g = 0; g < gn; ++g) s[(g0 + g) * lds + j] = V::reduce(acc[g]) * kscale + tail[g] * tscale;
      }
    }
  });
}

template <class V>
void attn_accum_impl(const float* p, int64_t ldp, int G, const void* v, DType vt, int64_t n, int64_t v_stride,
                     const float* vs, int64_t vs_stride, int64_t hd, float* out) {
  using F = typename V::F;
  dispatch_dtype(vt, [&]<DType T>() {
    const auto* vd = static_cast<const typename Elem<T>::type*>(v);
    int64_t d = 0;
    // Each W-wide column strip of the G outputs stays in registers over all keys.
    for (; d + V::W <= hd; d += V::W) {
      for (int g = 0; g < G; ++g) {
        F acc = V::load(out + g * hd + d);
        for (int64_t j = 0; j < n; ++j) {
          float pj = p[g * ldp + j];
          if constexpr (T == DType::kF8E4M3) pj *= vs[j * vs_stride] * V::kFp8Mul;
          acc = V::fma(V::set1(pj), load_weight<V, T>(vd + j * v_stride + d), acc);
        }
        V::store(out + g * hd + d, acc);
      }
    }
    for (; d < hd; ++d) {
      for (int g = 0; g < G; ++g) {
        float acc = out[g * hd + d];
        for (int64_t j = 0; j < n; ++j) {
          float pj = p[g * ldp + j];
          if constexpr (T == DType::kF8E4M3) pj *= vs[j * vs_stride];
          acc = std::fma(pj, load_weight_scalar<T>(vd + j * v_stride + d), acc);
        }
        out[g * hd + d] = acc;
      }
    }
  });
}

template <class V>
float sum_f32_impl(const float* p, int64_t n) {
  using F = typename V::F;
  constexpr int kChains = 8;  // independent adds: loads, not add latency, must limit
  F acc[kChains];
  for (F& a : acc) a = V::zero();
  int64_t i = 0;
  for (; i + kChains * V::W <= n; i += kChains * V::W)
    for (int c = 0; c < kChains; ++c) acc[c] = V::add(acc[c], V::load(p + i + c * V::W));
  for (int c = 1; c < kChains; ++c) acc[0] = V::add(acc[0], acc[c]);
  float s = V::reduce(acc[0]);
  for (; i < n; ++i) s += p[i];
  return s;
}

template <class V>
float fma_probe_impl(int64_t iters) {
  using F = typename V::F;
  F acc[kFmaChains];
  for (int c = 0; c < kFmaChains; ++c) acc[c] = V::set1(1.0f + c * 1e-3f);
  // Run-time operands: without fast-math the compiler must do every FMA.
  volatile float av = 0.999999f, bv = 1e-7f;
  const F a = V::set1(av), b = V::set1(bv);
  for (int64_t i = 0; i < iters; ++i)
    for (int c = 0; c < kFmaChains; ++c) acc[c] = V::fma(acc[c], a, b);
  for (int c = 1; c < kFmaChains; ++c) acc[0] = V::add(acc[0], acc[c]);
  return V::reduce(acc[0]);
}

template <class V>
const Kernels& make_kernels(Isa isa) {
  static const Kernels k{isa, &matmul_impl<V>, &to_f32_impl<V>, &from_f32_impl<V>, &attn_scores_impl<V>,
                         &attn_accum_impl<V>, &sum_f32_impl<V>, &fma_probe_impl<V>, V::W};
  return k;
}
