// Helpers of the tests that hold a backend to the CPU backend, op by op:
// the two side by side, random tensors in every stored dtype, activations on
// the backend under test (outputs poisoned with NaN so that an unwritten
// element fails), and error norms. Plain C++: used by the backend-generic
// suites (tests/backend/) and the CUDA backend's own (tests/backend/cuda/).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <limits>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "../model/test_paths.h"
#include "model/backend.h"
#include "model/kv_cache.h"
#include "model/weights.h"
#include "tensor/dtype.h"

namespace m2::test {

// ‖a − b‖₂ / ‖b‖₂; infinite if a has a non-finite element.
inline double rel_error(const std::vector<float>& a, const std::vector<float>& b) {
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (!std::isfinite(a[i])) return std::numeric_limits<double>::infinity();
    num += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
    den += double(b[i]) * b[i];
  }
  return std::sqrt(num / std::max(den, 1e-300));
}

inline double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  double m = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (!std::isfinite(a[i])) return std::numeric_limits<double>::infinity();
    m = std::max(m, std::abs(double(a[i]) - b[i]));
  }
  return m;
}

// Host tensors that live as long as the test.
class HostTensors {
 public:
  explicit HostTensors(uint64_t seed) : rng_(seed) {}

  std::mt19937_64& rng() { return rng_; }
  float normal() { return nd_(rng_); }
  std::vector<float> randn(size_t n, float scale = 1.0f) {
    std::vector<float> v(n);
    for (float& x : v) x = normal() * scale;
    return v;
  }

  // Values `vals` stored as `dtype` (F32, BF16, F16 or F8_E4M3 codes).
  TensorView store(const std::vector<float>& vals, DType dtype, Shape shape) {
    auto& b = bytes_.emplace_back(vals.size() * dtype_size(dtype));
    for (size_t i = 0; i < vals.size(); ++i) {
      switch (dtype) {
        case DType::kBF16: reinterpret_cast<uint16_t*>(b.data())[i] = f32_to_bf16(vals[i]); break;
        case DType::kF16: reinterpret_cast<uint16_t*>(b.data())[i] = f32_to_f16(vals[i]); break;
        case DType::kF8E4M3: b[i] = f32_to_f8e4m3(vals[i]); break;
        default: reinterpret_cast<float*>(b.data())[i] = vals[i]; break;
      }
    }
    return TensorView{dtype, shape, b.data()};
  }

  // A random [N, K] linear with rows of norm ~1 (FP8: codes of U[-64, 64)
  // with random 128 x 128 block scales, like a quantised checkpoint).
  Linear linear(DType dtype, int64_t N, int64_t K) {
    Linear l;
    if (dtype == DType::kF8E4M3) {
      std::uniform_real_distribution<float> u(-64.0f, 64.0f), s(0.5f, 1.5f);
      std::vector<float> codes(N * K);
      for (float& c : codes) c = u(rng_);
      l.weight = store(codes, dtype, Shape{N, K});
      const int64_t sr = (N + 127) / 128, sc = (K + 127) / 128;
      std::vector<float> scales(sr * sc);
      for (float& x : scales) x = s(rng_) / (37.0f * std::sqrt(float(K)));
      l.scale_inv = store(scales, DType::kF32, Shape{sr, sc});
    } else {
      l.weight = store(randn(N * K, 1.0f / std::sqrt(float(K))), dtype, Shape{N, K});
    }
    return l;
  }

 private:
  std::mt19937_64 rng_;
  std::normal_distribution<float> nd_{0.0f, 1.0f};
  std::deque<std::vector<uint8_t>> bytes_;
};

// E random FP8 experts [I, H] / [H, I] in w's single layer.
inline LayerWeights& random_fp8_experts(HostTensors& h, ModelWeights& w, int E, int64_t H, int64_t I) {
  w.layers.resize(1);
  LayerWeights& L = w.layers[0];
  L.experts.resize(E);
  for (auto& e : L.experts) {
    e.w1 = h.linear(DType::kF8E4M3, I, H);
    e.w3 = h.linear(DType::kF8E4M3, I, H);
    e.w2 = h.linear(DType::kF8E4M3, H, I);
  }
  return L;
}

// A fresh device copy of host values on backend b as an Act [rows, size /
// rows], its memory kept alive by `keep`; and a device Act back to the host.
inline Act upload_act(Backend& b, std::vector<std::shared_ptr<void>>& keep, const std::vector<float>& v,
                      int64_t rows) {
  auto mem = b.allocate(v.size() * sizeof(float));
  b.copy_from_host(v.data(), mem.get(), v.size() * sizeof(float));
  keep.push_back(mem);
  return Act{static_cast<float*>(mem.get()), rows, static_cast<int64_t>(v.size()) / rows};
}
inline std::vector<float> download_act(Backend& b, const Act& a) {
  std::vector<float> v(a.rows * a.cols);
  b.copy_to_host(a.data, v.data(), v.size() * sizeof(float));
  return v;
}

// The backend under test (dev_) beside the CPU backend (cpu_); a suite's
// fixture makes both in its SetUp.
class DeviceVsCpu {
 protected:

  // Fresh copy of host values on the backend under test as an Act [rows, size / rows].
  Act to_dev(const std::vector<float>& v, int64_t rows) { return upload_act(*dev_, memory_, v, rows); }
  // A device output filled with NaN.
  Act poisoned(int64_t rows, int64_t cols) {
    return to_dev(std::vector<float>(rows * cols, std::numeric_limits<float>::quiet_NaN()), rows);
  }
  std::vector<float> to_host(const Act& a) { return download_act(*dev_, a); }
  // Uninitialised device memory for n T's (at least one), freed with the test.
  template <class T>
  T* scratch(size_t n) {
    auto mem = dev_->allocate(std::max<size_t>(n, 1) * sizeof(T));
    memory_.push_back(mem);
    return static_cast<T*>(mem.get());
  }
  template <class T>
  T* dev_array(const std::vector<T>& v) {
    auto mem = dev_->allocate(std::max<size_t>(v.size(), 1) * sizeof(T));
    dev_->copy_from_host(v.data(), mem.get(), v.size() * sizeof(T));
    memory_.push_back(mem);
    return static_cast<T*>(mem.get());
  }
  template <class T>
  std::vector<T> to_host(const T* p, size_t n) {
    std::vector<T> v(n);
    dev_->copy_to_host(p, v.data(), n * sizeof(T));
    return v;
  }
  static Act host_act(std::vector<float>& v, int64_t rows) {
    return Act{v.data(), rows, static_cast<int64_t>(v.size()) / rows};
  }
  // One layer's paged KV caches on both backends, zeroed, then filled through
  // kv_store with the same random K and V: each sequence's blocks are a
  // random subset of the pool in random order, and its rows of the step
  // follow the previous sequence's.
  struct PagedKv {
    KvCacheShape shape;
    KvCache gpu, cpu;
    std::vector<std::vector<int32_t>> tables;  // the slices' block tables
    std::vector<SeqSlice> slices;
    int64_t rows = 0;  // of the step, all sequences
  };
  PagedKv paged_kv(HostTensors& h, int kv_heads, int hd, int block_size, DType dtype,
                   const std::vector<std::pair<int64_t, int64_t>>& seqs) {  // (context, rows of the step)
    int64_t blocks = 0;
    for (auto [ctx, n] : seqs) blocks += (ctx + block_size - 1) / block_size;
    const KvCacheShape shape{1, kv_heads, hd, block_size, blocks, dtype};
    PagedKv p{shape, KvCache(shape, dev_->allocate(KvCache::storage_bytes(shape))),
              KvCache(shape, cpu_->allocate(KvCache::storage_bytes(shape))), {}, {}, 0};
    const std::vector<uint8_t> zeros(KvCache::storage_bytes(shape), 0);  // slots past a context compare equal
    dev_->copy_from_host(zeros.data(), p.gpu.k_base(0), zeros.size());
    std::memcpy(p.cpu.k_base(0), zeros.data(), zeros.size());
    std::vector<int32_t> order(blocks);
    std::iota(order.begin(), order.end(), 0);
    std::shuffle(order.begin(), order.end(), h.rng());
    int64_t next = 0;
    const int64_t kv = static_cast<int64_t>(kv_heads) * hd;
    for (auto [ctx, n] : seqs) {
      const int64_t n_blocks = (ctx + block_size - 1) / block_size;
      auto& table = p.tables.emplace_back(order.begin() + next, order.begin() + next + n_blocks);
      next += n_blocks;
      std::vector<int64_t> slots;
      for (int64_t i = 0; i < ctx; ++i) slots.push_back(int64_t(table[i / block_size]) * block_size + i % block_size);
      auto k = h.randn(ctx * kv), v = h.randn(ctx * kv);
      dev_->kv_store(p.gpu, 0, to_dev(k, ctx), to_dev(v, ctx), slots);
      cpu_->kv_store(p.cpu, 0, host_act(k, ctx), host_act(v, ctx), slots);
      p.slices.push_back({p.rows, n, ctx, {}});
      p.rows += n;
    }
    for (size_t i = 0; i < p.slices.size(); ++i) p.slices[i].block_table = p.tables[i];
    return p;
  }

  // Prepares the tensors placed in `w` (any of its slots) on the backend under test.
  void prepare(ModelWeights& w) { ASSERT_TRUE(dev_->prepare_weights(w).ok()); }

  std::unique_ptr<Backend> dev_, cpu_;
  std::vector<std::shared_ptr<void>> memory_;
};

}  // namespace m2::test
