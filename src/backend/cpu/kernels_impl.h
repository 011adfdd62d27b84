// Kernel bodies shared by every ISA. Included once per ISA translation unit
// with a vector policy `V` providing:
//   F, W (lanes), kMaxTT (token rows per register tile), kFp8Mul,
//   zero, set1, load, store, fma (a*b+c), mul, add, reduce (horizontal sum),
//   load_bf16, load_f16, load_fp8 (value / kFp8Mul), store_bf16 (RNE).
// Only include from kernels_<isa>.cpp, inside that file's own namespace,
// after <algorithm>, <vector> and backend/cpu/kernels.h.

// Converts W stored weights at p (element offset already applied) to fp32.
template <class V>
inline typename V::F load_weight(DType t, const void* p) {
  switch (t) {
    case DType::kBF16: return V::load_bf16(static_cast<const uint16_t*>(p));
    case DType::kF16: return V::load_f16(static_cast<const uint16_t*>(p));
    case DType::kF8E4M3: return V::load_fp8(static_cast<const uint8_t*>(p));
    default: return V::load(static_cast<const float*>(p));
  }
}

inline float load_weight_scalar(DType t, const void* p) {
  switch (t) {
    case DType::kBF16: return bf16_to_f32(*static_cast<const uint16_t*>(p));
    case DType::kF16: return f16_to_f32(*static_cast<const uint16_t*>(p));
    case DType::kF8E4M3: return f8e4m3_to_f32(*static_cast<const uint8_t*>(p));
    default: return *static_cast<const float*>(p);
  }
}

inline const void* elem(DType t, const void* base, int64_t i) {
  return static_cast<const uint8_t*>(base) + i * static_cast<int64_t>(dtype_size(t));
}

// Column blocks over which one scale applies: FP8 blocks, else all of K.
inline int64_t col_block(const WeightRef& w, int64_t K) {
  return w.dtype == DType::kF8E4M3 ? w.block_cols : K;
}

// Scale of (row, column block) as a multiplier of what load_fp8 returns.
template <class V>
inline float row_scale(const WeightRef& w, int64_t row, int64_t kb) {
  if (w.dtype != DType::kF8E4M3) return 1.0f;
  return w.scales[(row / w.block_rows) * w.scale_ld + kb / w.block_cols] * V::kFp8Mul;
}

// Rows [n, n+R) decoded (and scaled) into panel [R, K] fp32. The values are
// exactly those the fused path computes in registers.
template <class V, int R>
void decode_panel(const WeightRef& w, int64_t n, int64_t K, float* panel) {
  using F = typename V::F;
  const int64_t KB = col_block(w, K);
  for (int r = 0; r < R; ++r) {
    const int64_t row = n + r;
    for (int64_t kb = 0; kb < K; kb += KB) {
      const int64_t ke = std::min(K, kb + KB);
      const float sc = row_scale<V>(w, row, kb);
      const F s = V::set1(sc);
      int64_t k = kb;
      for (; k + V::W <= ke; k += V::W) {
        F x = load_weight<V>(w.dtype, elem(w.dtype, w.data, row * w.ld + k));
        V::store(panel + r * K + k, w.dtype == DType::kF8E4M3 ? V::mul(x, s) : x);
      }
      for (; k < ke; ++k) {
        const float x = load_weight_scalar(w.dtype, elem(w.dtype, w.data, row * w.ld + k));
        panel[r * K + k] = w.dtype == DType::kF8E4M3 ? x * (sc / V::kFp8Mul) : x;
      }
    }
  }
}

// Register tile: TT token rows × R weight rows over all of K. With `panel`
// the weights come pre-decoded, else they are decoded on the fly; both give
// bit-identical results.
template <class V, int TT, int R, bool kPanel>
inline void tile(const float* x, int64_t ldx, int64_t K, const WeightRef& w, int64_t n, const float* panel, float* y,
                 int64_t ldy) {
  using F = typename V::F;
  F acc[TT][R];
  float tail[TT][R];
  for (int t = 0; t < TT; ++t)
    for (int r = 0; r < R; ++r) acc[t][r] = V::zero(), tail[t][r] = 0.0f;
  const int64_t KB = col_block(w, K);
  const bool fp8 = w.dtype == DType::kF8E4M3;
  for (int64_t kb = 0; kb < K; kb += KB) {
    const int64_t ke = std::min(K, kb + KB);
    F s[R];
    float sc[R];
    if (!kPanel) {
      for (int r = 0; r < R; ++r) sc[r] = row_scale<V>(w, n + r, kb), s[r] = V::set1(sc[r]);
    }
    int64_t k = kb;
    for (; k + V::W <= ke; k += V::W) {
      F wv[R];
      for (int r = 0; r < R; ++r) {
        if (kPanel) {
          wv[r] = V::load(panel + r * K + k);
        } else {
          wv[r] = load_weight<V>(w.dtype, elem(w.dtype, w.data, (n + r) * w.ld + k));
          if (fp8) wv[r] = V::mul(wv[r], s[r]);
        }
      }
      for (int t = 0; t < TT; ++t) {
        const F xv = V::load(x + t * ldx + k);
        for (int r = 0; r < R; ++r) acc[t][r] = V::fma(xv, wv[r], acc[t][r]);
      }
    }
    for (; k < ke; ++k) {
      for (int r = 0; r < R; ++r) {
        float wr;
        if (kPanel) {
          wr = panel[r * K + k];
        } else {
          wr = load_weight_scalar(w.dtype, elem(w.dtype, w.data, (n + r) * w.ld + k));
          if (fp8) wr *= sc[r] / V::kFp8Mul;
        }
        for (int t = 0; t < TT; ++t) tail[t][r] += x[t * ldx + k] * wr;
      }
    }
  }
  for (int t = 0; t < TT; ++t)
    for (int r = 0; r < R; ++r) y[t * ldy + n + r] = V::reduce(acc[t][r]) + tail[t][r];
}

template <class V, int R, bool kPanel>
inline void tile_rows(const float* x, int64_t T, int64_t ldx, int64_t K, const WeightRef& w, int64_t n,
                      const float* panel, float* y, int64_t ldy) {
  int64_t t = 0;
  for (; t + V::kMaxTT <= T; t += V::kMaxTT)
    tile<V, V::kMaxTT, R, kPanel>(x + t * ldx, ldx, K, w, n, panel, y + t * ldy, ldy);
  for (; t < T; ++t) tile<V, 1, R, kPanel>(x + t * ldx, ldx, K, w, n, panel, y + t * ldy, ldy);
}

template <class V>
void matmul_impl(const float* x, int64_t T, int64_t ldx, int64_t K, const WeightRef& w, int64_t n_begin,
                 int64_t n_end, float* y, int64_t ldy) {
  constexpr int R = 4;
  // Few tokens: stream the weights once, decoding in registers (decode path).
  if (T <= V::kMaxTT) {
    int64_t n = n_begin;
    for (; n + R <= n_end; n += R) tile_rows<V, R, false>(x, T, ldx, K, w, n, nullptr, y, ldy);
    for (; n < n_end; ++n) tile_rows<V, 1, false>(x, T, ldx, K, w, n, nullptr, y, ldy);
    return;
  }
  // Many tokens: decode an R-row panel once per block of tokens, reuse it.
  constexpr int64_t kTokenBlock = 64;
  thread_local std::vector<float> panel;
  panel.resize(static_cast<size_t>(R * K));
  for (int64_t tb = 0; tb < T; tb += kTokenBlock) {
    const int64_t tn = std::min(kTokenBlock, T - tb);
    int64_t n = n_begin;
    for (; n + R <= n_end; n += R) {
      decode_panel<V, R>(w, n, K, panel.data());
      tile_rows<V, R, true>(x + tb * ldx, tn, ldx, K, w, n, panel.data(), y + tb * ldy, ldy);
    }
    for (; n < n_end; ++n) {
      decode_panel<V, 1>(w, n, K, panel.data());
      tile_rows<V, 1, true>(x + tb * ldx, tn, ldx, K, w, n, panel.data(), y + tb * ldy, ldy);
    }
  }
}

template <class V>
void to_f32_impl(DType t, const void* src, float* dst, int64_t n) {
  int64_t i = 0;
  const float mul = t == DType::kF8E4M3 ? V::kFp8Mul : 1.0f;
  const typename V::F m = V::set1(mul);
  for (; i + V::W <= n; i += V::W) {
    typename V::F v = load_weight<V>(t, elem(t, src, i));
    V::store(dst + i, t == DType::kF8E4M3 ? V::mul(v, m) : v);
  }
  for (; i < n; ++i) dst[i] = load_weight_scalar(t, elem(t, src, i));
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
                      float scale, float* s, int64_t lds) {
  using F = typename V::F;
  constexpr int kMaxG = 16;
  for (int g0 = 0; g0 < G; g0 += kMaxG) {
    const int gn = std::min(kMaxG, G - g0);
    for (int64_t j = 0; j < n; ++j) {
      const void* kj = elem(kt, k, j * k_stride);
      F acc[kMaxG];
      float tail[kMaxG];
      for (int g = 0; g < gn; ++g) acc[g] = V::zero(), tail[g] = 0.0f;
      int64_t d = 0;
      for (; d + V::W <= hd; d += V::W) {
        const F kv = load_weight<V>(kt, elem(kt, kj, d));
        for (int g = 0; g < gn; ++g) acc[g] = V::fma(V::load(q + (g0 + g) * hd + d), kv, acc[g]);
      }
      for (; d < hd; ++d) {
        const float kv = load_weight_scalar(kt, elem(kt, kj, d));
        for (int g = 0; g < gn; ++g) tail[g] += q[(g0 + g) * hd + d] * kv;
      }
      for (int g = 0; g < gn; ++g) s[(g0 + g) * lds + j] = (V::reduce(acc[g]) + tail[g]) * scale;
    }
  }
}

template <class V>
void attn_accum_impl(const float* p, int64_t ldp, int G, const void* v, DType vt, int64_t n, int64_t v_stride,
                     int64_t hd, float* out) {
  using F = typename V::F;
  int64_t d = 0;
  // Each W-wide column strip of the G outputs stays in registers over all keys.
  for (; d + V::W <= hd; d += V::W) {
    for (int g = 0; g < G; ++g) {
      F acc = V::load(out + g * hd + d);
      for (int64_t j = 0; j < n; ++j) {
        const F vv = load_weight<V>(vt, elem(vt, v, j * v_stride + d));
        acc = V::fma(V::set1(p[g * ldp + j]), vv, acc);
      }
      V::store(out + g * hd + d, acc);
    }
  }
  for (; d < hd; ++d) {
    for (int g = 0; g < G; ++g) {
      float acc = out[g * hd + d];
      for (int64_t j = 0; j < n; ++j) acc += p[g * ldp + j] * load_weight_scalar(vt, elem(vt, v, j * v_stride + d));
      out[g * hd + d] = acc;
    }
  }
}

template <class V>
const Kernels& make_kernels(Isa isa) {
  static const Kernels k{isa, &matmul_impl<V>, &to_f32_impl<V>, &from_f32_impl<V>, &attn_scores_impl<V>,
                         &attn_accum_impl<V>};
  return k;
}
