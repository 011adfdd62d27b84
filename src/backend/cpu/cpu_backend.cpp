#include "backend/cpu/cpu_backend.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>

namespace m2 {

std::unique_ptr<Backend> make_cpu_backend() { return std::make_unique<cpu::CpuBackend>(); }
std::unique_ptr<Backend> make_cpu_backend(int threads) { return std::make_unique<cpu::CpuBackend>(threads); }

namespace cpu {

WeightRef weight_ref(const Linear& w) {
  WeightRef r = weight_ref(w.weight);
  r.ld = w.ld();
  if (w.is_fp8()) {
    r.scales = w.scale_inv.as<float>();
    r.scale_ld = w.scale_inv.shape[1];
    r.block_rows = w.block_rows;
    r.block_cols = w.block_cols;
  }
  return r;
}

WeightRef weight_ref(const TensorView& dense) {
  WeightRef r;
  r.dtype = dense.dtype;
  r.data = dense.data;
  r.ld = dense.shape.ndim == 2 ? dense.shape[1] : dense.shape[0];
  return r;
}

CpuBackend::CpuBackend() : k_(kernels()), pool_(ThreadPool::global()) {}
CpuBackend::CpuBackend(int threads)
    : own_pool_(std::make_unique<ThreadPool>(threads)), k_(kernels()), pool_(*own_pool_) {}
CpuBackend::CpuBackend(ThreadPool& pool) : k_(kernels()), pool_(pool) {}

Status CpuBackend::prepare_weights(ModelWeights& w) {
  if (!w.dummy_fp8.empty())
    return errorf("these dummy weights leave their {} FP8 tensors to a GPU backend to generate; the CPU backend "
                  "computes from host memory (load them without LoadOptions::dummy_fp8_on_device)",
                  w.dummy_fp8.size());
  return Status();
}

std::shared_ptr<void> CpuBackend::allocate(size_t bytes) {
  const size_t rounded = (std::max<size_t>(bytes, 1) + 63) / 64 * 64;
  void* p = std::aligned_alloc(64, rounded);
  if (!p) return nullptr;
  // Touched now: the KV pool's pages are resident from the start (so RSS
  // does not creep up for hours as sequences first reach each block, which
  // looked like a leak, issue 23) and a pool the machine cannot hold fails
  // here rather than in the middle of serving.
  std::memset(p, 0, rounded);
  return std::shared_ptr<void>(p, [](void* q) { std::free(q); });
}

void CpuBackend::copy_to_host(const void* src, void* dst_host, size_t bytes) { std::memcpy(dst_host, src, bytes); }
void CpuBackend::copy_from_host(const void* src_host, void* dst, size_t bytes) { std::memcpy(dst, src_host, bytes); }

void CpuBackend::embed(const Weight& table, std::span<const int32_t> ids, int64_t first_id, Act out) {
  const int64_t H = out.cols, rows = table.shape[0];
  const size_t row_bytes = static_cast<size_t>(H) * dtype_size(table.dtype);
  for (size_t i = 0; i < ids.size(); ++i) {
    const int64_t r = ids[i] - first_id;
    if (r < 0 || r >= rows) {  // another rank's id
      std::fill(out.data + i * H, out.data + (i + 1) * H, 0.0f);
      continue;
    }
    const void* row = static_cast<const uint8_t*>(table.data) + static_cast<size_t>(r) * row_bytes;
    k_.to_f32(table.dtype, row, out.data + i * H, H);
  }
}

ActCopy CpuBackend::rms_norm(Act x, const Weight& weight, float eps, Act out) {
  const int64_t n = x.cols;
  thread_local std::vector<float> w;
  w.resize(n);
  k_.to_f32(weight.dtype, weight.data, w.data(), n);
  const float* wp = w.data();  // workers must use the caller's thread_local copy
  // Statistics in double: exact enough that the result does not depend on
  // the summation order, so every backend can match it.
  auto row = [x, out, n, eps, wp](int64_t r) {
    const float* xr = x.data + r * n;
    float* o = out.data + r * n;
    double ss = 0;
    for (int64_t j = 0; j < n; ++j) ss += static_cast<double>(xr[j]) * xr[j];
    const float inv = static_cast<float>(1.0 / std::sqrt(ss / n + eps));
    for (int64_t j = 0; j < n; ++j) o[j] = xr[j] * inv * wp[j];
  };
  if (x.rows * n < (1 << 16)) {
    for (int64_t r = 0; r < x.rows; ++r) row(r);
  } else {
    pool_.parallel_for(x.rows, [&](int64_t r, int) { row(r); });
  }
  return {};  // (no low-precision copies: every product reads fp32)
}

void CpuBackend::add(Act x, Act y) {
  const int64_t n = x.rows * x.cols;
  for (int64_t i = 0; i < n; ++i) x.data[i] += y.data[i];
}

void CpuBackend::gather_rows(Act x, std::span<const int64_t> rows, Act out) {
  for (size_t i = 0; i < rows.size(); ++i)
    std::memcpy(out.data + i * out.cols, x.data + rows[i] * x.cols, sizeof(float) * x.cols);
}

void CpuBackend::matmul_ref(const float* x, int64_t T, int64_t K, const WeightRef& w, int64_t N, float* y) {
  // Tiny products are not worth waking the workers.
  if (T * N * K < (1 << 18) || pool_.size() == 1) {
    k_.matmul(x, T, K, K, w, 0, N, y, N);
    return;
  }
  pool_.parallel_ranges(N, 4, [&](int64_t b, int64_t e, int) { k_.matmul(x, T, K, K, w, b, e, y, N); });
}

void CpuBackend::matmul(Act x, const Linear& w, Act y, const ActCopy&) {
  matmul_ref(x.data, x.rows, x.cols, weight_ref(w), y.cols, y.data);
}

void CpuBackend::qk_norm_rope(Act q, Act k, const Weight& q_norm, const Weight& k_norm, float eps,
                              std::span<const int32_t> positions, const RopeParams& rope_params) {
  if (!q_norm.empty()) rms_norm(q, q_norm, eps, q);
  if (!k_norm.empty()) rms_norm(k, k_norm, eps, k);
  rope(q, k, positions, rope_params);
}

void CpuBackend::qk_sum_squares(Act q, Act k, Act ss) {
  for (int64_t t = 0; t < q.rows; ++t) {
    double sq = 0, sk = 0;  // double, as rms_norm's statistics
    for (int64_t j = 0; j < q.cols; ++j) sq += static_cast<double>(q.data[t * q.cols + j]) * q.data[t * q.cols + j];
    for (int64_t j = 0; j < k.cols; ++j) sk += static_cast<double>(k.data[t * k.cols + j]) * k.data[t * k.cols + j];
    ss.data[2 * t] = static_cast<float>(sq);
    ss.data[2 * t + 1] = static_cast<float>(sk);
  }
}

void CpuBackend::scale_row(const float* x, int64_t n, double sum_sq, double count, float eps, const float* w,
                           float* out) {
  const float inv = static_cast<float>(1.0 / std::sqrt(sum_sq / count + eps));
  for (int64_t j = 0; j < n; ++j) out[j] = x[j] * inv * w[j];
}

void CpuBackend::qk_norm_rope_sums(Act q, Act k, Act ss, double q_count, double k_count, const Weight& q_norm,
                                   const Weight& k_norm, float eps, std::span<const int32_t> positions,
                                   const RopeParams& rope_params) {
  auto norm = [&](Act x, const Weight& weight, int which, double count) {
    if (weight.empty()) return;
    std::vector<float> w(static_cast<size_t>(x.cols));
    k_.to_f32(weight.dtype, weight.data, w.data(), x.cols);
    for (int64_t t = 0; t < x.rows; ++t)
      scale_row(x.data + t * x.cols, x.cols, ss.data[2 * t + which], count, eps, w.data(), x.data + t * x.cols);
  };
  norm(q, q_norm, 0, q_count);
  norm(k, k_norm, 1, k_count);
  rope(q, k, positions, rope_params);
}

void CpuBackend::rope(Act q, Act k, std::span<const int32_t> positions, const RopeParams& rope) {
  // NeoX pairing on the first rotary_dim dims of each head: (i, i + rotary_dim/2).
  const int half = rope.rotary_dim / 2;
  std::vector<double> inv_freq(half);
  for (int i = 0; i < half; ++i) inv_freq[i] = 1.0 / std::pow(rope.theta, (2.0 * i) / rope.rotary_dim);
  std::vector<float> cs(2 * half);
  auto rotate = [&](float* row, int64_t width) {
    for (int64_t h = 0; h < width / rope.head_dim; ++h) {
      float* x = row + h * rope.head_dim;
      for (int i = 0; i < half; ++i) {
        const float c = cs[i], s = cs[half + i];
        const float a = x[i], b = x[i + half];
        x[i] = a * c - b * s;
        x[i + half] = b * c + a * s;
      }
    }
  };
  for (int64_t t = 0; t < q.rows; ++t) {
    for (int i = 0; i < half; ++i) {
      const double theta = positions[t] * inv_freq[i];
      cs[i] = static_cast<float>(std::cos(theta));
      cs[half + i] = static_cast<float>(std::sin(theta));
    }
    rotate(q.data + t * q.cols, q.cols);
    rotate(k.data + t * k.cols, k.cols);
  }
}

void CpuBackend::kv_store(KvCache& cache, int layer, Act k, Act v, std::span<const int64_t> slots) {
  const KvCacheShape& s = cache.shape();
  const int64_t row = s.token_elems();
  const size_t esz = dtype_size(s.dtype);
  if (s.scaled()) {  // FP8: one scale per (token, kv head) = amax / 448
    auto store = [&](const float* src, uint8_t* dst, float* scales) {
      for (int h = 0; h < s.num_kv_heads; ++h) {
        const float* x = src + h * s.head_dim;
        float amax = 0.0f;
        for (int d = 0; d < s.head_dim; ++d) amax = std::max(amax, std::fabs(x[d]));
        const float sc = amax > 0.0f ? amax / 448.0f : 1.0f;
        scales[h] = sc;
        for (int d = 0; d < s.head_dim; ++d) dst[h * s.head_dim + d] = f32_to_f8e4m3(x[d] / sc);
      }
    };
    for (size_t t = 0; t < slots.size(); ++t) {
      store(k.data + t * k.cols, static_cast<uint8_t*>(cache.k_base(layer)) + slots[t] * row,
            cache.k_scales(layer) + slots[t] * s.num_kv_heads);
      store(v.data + t * v.cols, static_cast<uint8_t*>(cache.v_base(layer)) + slots[t] * row,
            cache.v_scales(layer) + slots[t] * s.num_kv_heads);
    }
    return;
  }
  for (size_t t = 0; t < slots.size(); ++t) {
    uint8_t* kd = static_cast<uint8_t*>(cache.k_base(layer)) + static_cast<size_t>(slots[t] * row) * esz;
    uint8_t* vd = static_cast<uint8_t*>(cache.v_base(layer)) + static_cast<size_t>(slots[t] * row) * esz;
    k_.from_f32(s.dtype, k.data + t * k.cols, kd, row);
    k_.from_f32(s.dtype, v.data + t * v.cols, vd, row);
  }
}

}  // namespace cpu
}  // namespace m2
