// CUDA backend microbenchmarks at the real MiniMax-M2 shapes, each printed
// beside the GPU's ceilings measured in the same run (device-to-device copy
// bandwidth, cuBLASLt BF16/FP8 GEMM). Every op goes through the Backend
// interface; its launches are queued behind a delay kernel so that the GPU
// runs them back to back and CUDA events measure GPU time, not the host's
// launch rate. Inputs rotate over enough distinct weights (or layers) that
// L2 (50 MB on an H200) cannot serve them: the bytes counted come from HBM.
//
//   cuda_kernels_bench [--quick]
#include <cuda_runtime.h>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/runtime/device_caps.h"
#include "backend/cuda/gemm/matmul.h"
#include "backend/cuda/runtime/roofline.h"
#include "backend/cuda/sampling/sampling.h"
#include "model/backend.h"
#include "util/status.h"

namespace m2 {
namespace {

constexpr size_t kRotateBytes = size_t{256} << 20;  // > 5x L2

void require(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(e));
    std::exit(1);
  }
}

// Random bytes that are finite values of `dtype`.
class Filler {
 public:
  void fill(void* p, size_t bytes, DType dtype) {
    auto* b = static_cast<uint8_t*>(p);
    for (size_t i = 0; i < bytes; i += 8) {
      uint64_t r = next();
      for (size_t j = i; j < std::min(bytes, i + 8); ++j, r >>= 8) b[j] = static_cast<uint8_t>(r);
    }
    if (dtype == DType::kF8E4M3) {
      for (size_t i = 0; i < bytes; ++i)
        if ((b[i] & 0x7f) == 0x7f) b[i] ^= 1;  // no NaN codes
    } else if (dtype == DType::kBF16) {
      auto* h = static_cast<uint16_t*>(p);
      for (size_t i = 0; i < bytes / 2; ++i) h[i] = (h[i] & 0x807f) | 0x3c00;  // ±[2^-7, 2^-6)
    } else if (dtype == DType::kF32) {
      auto* f = static_cast<float*>(p);
      for (size_t i = 0; i < bytes / 4; ++i) f[i] = static_cast<float>(static_cast<int32_t>(next() >> 40) - (1 << 23)) / (1 << 26);
    }
  }
  uint64_t next() {
    uint64_t z = (s_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }

 private:
  uint64_t s_ = 7;
};

struct Row {
  std::string name, shape;
  double us, bytes, flops;
};

class Bench {
 public:
  // `variant`: the CudaOptions fields a row compares (the rest: M2CPP_CUDA_OPTIONS).
  explicit Bench(void (*variant)(cuda::CudaOptions&) = nullptr) : gpu_(make_cuda_backend(0, options(variant))) {
    if (!gpu_) std::exit(1);
    stream_ = static_cast<cudaStream_t>(cuda_stream(*gpu_));
    require(cudaEventCreate(&start_), "event");
    require(cudaEventCreate(&stop_), "event");
  }

  Backend& gpu() { return *gpu_; }
  static cuda::CudaOptions options(void (*variant)(cuda::CudaOptions&)) {
    auto o = cuda::CudaOptions::parse("");
    if (!o.ok()) std::fprintf(stderr, "%s\n", o.status().message().c_str()), std::exit(1);
    cuda::CudaOptions v = *o;
    if (variant) variant(v);
    return v;
  }

  TensorView host_tensor(DType dtype, Shape shape) {
    auto& b = host_.emplace_back(static_cast<size_t>(shape.numel()) * dtype_size(dtype));
    filler_.fill(b.data(), b.size(), dtype);
    return TensorView{dtype, shape, b.data()};
  }
  Linear linear(DType dtype, int64_t N, int64_t K) {
    Linear l;
    l.weight = host_tensor(dtype, Shape{N, K});
    if (dtype == DType::kF8E4M3) {
      l.scale_inv = host_tensor(DType::kF32, Shape{(N + 127) / 128, (K + 127) / 128});
      for (int64_t i = 0; i < l.scale_inv.shape.numel(); ++i) const_cast<float*>(l.scale_inv.as<float>())[i] = 1e-3f;
    }
    return l;
  }
  Act act(int64_t rows, int64_t cols) {
    std::vector<float> v(rows * cols);
    for (float& x : v) x = static_cast<float>(static_cast<int32_t>(filler_.next() >> 40) - (1 << 23)) / (1 << 23);
    auto mem = gpu_->allocate(v.size() * sizeof(float));
    gpu_->copy_from_host(v.data(), mem.get(), v.size() * sizeof(float));
    device_.push_back(mem);
    return Act{static_cast<float*>(mem.get()), rows, cols};
  }
  template <class T>
  T* device_array(const std::vector<T>& v) {
    auto mem = gpu_->allocate(v.size() * sizeof(T));
    gpu_->copy_from_host(v.data(), mem.get(), v.size() * sizeof(T));
    device_.push_back(mem);
    return static_cast<T*>(mem.get());
  }
  void prepare(ModelWeights& w) {
    if (!gpu_->prepare_weights(w).ok()) std::exit(1);
  }

  // GPU time per call of op(i), i = 0..n-1 (after warm-up calls).
  double time_us(int n, const std::function<void(int)>& op) {
    for (int i = 0; i < 3; ++i) op(i);
    require(cudaStreamSynchronize(stream_), "warm-up");
    require(launch_gpu_delay_for(n), "delay");
    require(cudaEventRecord(start_, stream_), "event");
    for (int i = 0; i < n; ++i) op(i);
    require(cudaEventRecord(stop_, stream_), "event");
    require(cudaEventSynchronize(stop_), "timed ops");
    float ms = 0;
    require(cudaEventElapsedTime(&ms, start_, stop_), "event");
    return ms * 1e3 / n;
  }

  void add(const std::string& name, const std::string& shape, double us, double bytes, double flops = 0) {
    rows_.push_back({name, shape, us, bytes, flops});
    std::printf("  %-34s %-22s %9.2f us  %8.1f GB/s\n", name.c_str(), shape.c_str(), us, bytes / us / 1e3);
    std::fflush(stdout);
  }
  const std::vector<Row>& rows() const { return rows_; }
  void append(const std::vector<Row>& rows) { rows_.insert(rows_.end(), rows.begin(), rows.end()); }

 private:
  cudaError_t launch_gpu_delay_for(int n) { return cuda::launch_gpu_delay(stream_, 1e-3 + n * 20e-6); }

  std::unique_ptr<Backend> gpu_;
  cudaStream_t stream_ = nullptr;
  cudaEvent_t start_ = nullptr, stop_ = nullptr;
  Filler filler_;
  std::deque<std::vector<uint8_t>> host_;
  std::vector<std::shared_ptr<void>> device_;
  std::vector<Row> rows_;
};

std::string dims(int64_t a, int64_t b) { return fmt::format("[{}, {}]", a, b); }

void bench_matmul(Bench& b, const char* name, DType dtype, int64_t N, int64_t K, std::vector<int64_t> tokens) {
  const size_t bytes = static_cast<size_t>(N * K) * dtype_size(dtype) + (dtype == DType::kF8E4M3 ? (N / 128) * (K / 128) * 4 : 0);
  const int copies = static_cast<int>(std::max<size_t>(1, (kRotateBytes + bytes - 1) / bytes));
  ModelWeights w;
  w.layers.resize(copies);
  for (auto& L : w.layers) L.q_proj = b.linear(dtype, N, K);
  b.prepare(w);
  for (int64_t T : tokens) {
    Act x = b.act(T, K), y = b.act(T, N);
    const int n = std::max(8, std::min(200, static_cast<int>(4e9 / bytes)));
    const double us = b.time_us(n, [&](int i) { b.gpu().matmul(x, w.layers[i % copies].q_proj, y); });
    b.add(fmt::format("matmul {} T={}", name, T), fmt::format("{} {}", dtype_name(dtype), dims(N, K)), us,
          static_cast<double>(bytes), 2.0 * T * N * K);
  }
}

// The FP8 decode products of a layer's attention on tensor cores
// (gemv_mma.cuh) and on the SIMT GEMV core, weights prepared once.
void bench_gemv_paths(Bench& b) {
  struct Shape2 {
    const char* name;
    int64_t N, K;
  };
  Bench simt([](cuda::CudaOptions& o) { o.gemv_mma = false; });
  for (const Shape2& sh : {Shape2{"q|k|v", 8192, 3072}, Shape2{"o_proj", 3072, 6144}}) {
    const size_t bytes = static_cast<size_t>(sh.N * sh.K) + (sh.N / 128) * (sh.K / 128) * 4;
    const int copies = static_cast<int>(std::max<size_t>(1, (kRotateBytes + bytes - 1) / bytes));
    for (bool mma : {true, false}) {
      Bench& on = mma ? b : simt;
      ModelWeights w;
      w.layers.resize(copies);
      for (auto& L : w.layers) L.q_proj = on.linear(DType::kF8E4M3, sh.N, sh.K);
      on.prepare(w);
      for (int64_t T : {1, 4}) {
        Act x = on.act(T, sh.K), y = on.act(T, sh.N);
        const double us = on.time_us(100, [&](int i) { on.gpu().matmul(x, w.layers[i % copies].q_proj, y); });
        b.add(fmt::format("matmul {} T={} [{}]", sh.name, T, mma ? "tensor cores" : "SIMT"),
              "F8_E4M3 " + dims(sh.N, sh.K), us, static_cast<double>(bytes), 2.0 * T * sh.N * sh.K);
      }
      if (!mma) continue;
      // The same weight every call (it fits in L2): what a product whose
      // weights were prefetched into L2 can reach; the "% copy" column then
      // compares L2 to the HBM copy rate.
      Act x = b.act(1, sh.K), y = b.act(1, sh.N);
      const double us = b.time_us(100, [&](int) { b.gpu().matmul(x, w.layers[0].q_proj, y); });
      b.add(fmt::format("matmul {} T=1 [tensor cores, L2 warm]", sh.name), "F8_E4M3 " + dims(sh.N, sh.K), us,
            static_cast<double>(bytes), 2.0 * sh.N * sh.K);
    }
  }
}

// The lm_head [200064, 3072] BF16 at decode batches of more than 16 tokens,
// on the path the backend picks (tensor cores unless the bf16_gemm variant is off,
// bf16_matmul.h). Bytes: what the tensor-core path must move, W read twice
// (once per GEMM) + x + y (the second GEMM's read-back of y and the bf16
// split scratch are not counted); FLOPs 2·T·N·K, and the tensor cores'
// executed 4·T·N·K (two GEMMs) beside cuBLASLt's BF16 rate measured in this
// run (0: not measured).
void bench_lm_head_gemm(Bench& b, const std::string& tag, std::vector<int64_t> tokens, double copy_bps,
                        double bf16_flops) {
  const int64_t N = 200064, K = 3072;
  ModelWeights w;
  w.lm_head = b.linear(DType::kBF16, N, K);  // 1.2 GB: no copies needed to defeat L2
  b.prepare(w);
  for (int64_t T : tokens) {
    Act x = b.act(T, K), y = b.act(T, N);
    const double us = b.time_us(8, [&](int) { b.gpu().matmul(x, w.lm_head, y); });
    const double bytes = 2.0 * N * K * 2 + T * K * 4.0 + T * N * 4.0, flops = 2.0 * T * N * K;
    b.add(fmt::format("lm_head{} T={}", tag, T), fmt::format("BF16 {}", dims(N, K)), us, bytes, flops);
    std::printf("    %.0f%% of copy (%.0f GB/s); %.1f TFLOP/s executed (2 GEMMs) = %s of cuBLASLt BF16 (%.0f)\n",
                copy_bps > 0 ? 100.0 * bytes / (us * 1e-6) / copy_bps : 0.0, copy_bps / 1e9, 2 * flops / us / 1e6,
                bf16_flops > 0 ? fmt::format("{:.1f}%", 100.0 * 2 * flops / (us * 1e-6) / bf16_flops).c_str()
                               : "n/a (--quick)",
                bf16_flops / 1e12);
  }
}

// One layer's experts (256, FP8, real shapes), 8 distinct random experts per
// token, a fresh routing every call.
void bench_moe(Bench& b, std::vector<int64_t> tokens, const std::string& tag = "") {
  const int64_t E = 256, H = 3072, I = 1536;
  const int k = 8;
  ModelWeights w;
  w.layers.resize(1);
  w.layers[0].experts.resize(E);
  for (auto& e : w.layers[0].experts) {
    e.w1 = b.linear(DType::kF8E4M3, I, H);
    e.w3 = b.linear(DType::kF8E4M3, I, H);
    e.w2 = b.linear(DType::kF8E4M3, H, I);
  }
  b.prepare(w);
  const double expert_bytes = 3.0 * I * H + 3.0 * (I / 128) * (H / 128) * 4;
  std::mt19937 rng(3);
  for (int64_t T : tokens) {
    const int variants = 64;
    std::vector<Routing> routings;
    std::vector<double> touched;  // distinct experts of each routing
    for (int v = 0; v < variants; ++v) {
      std::vector<int32_t> ids(T * k);
      std::vector<float> wts(T * k, 1.0f / k);
      std::vector<int32_t> perm(E);
      std::iota(perm.begin(), perm.end(), 0);
      std::vector<bool> used(E);
      for (int64_t t = 0; t < T; ++t) {
        std::shuffle(perm.begin(), perm.end(), rng);
        for (int j = 0; j < k; ++j) ids[t * k + j] = perm[j], used[perm[j]] = true;
      }
      touched.push_back(static_cast<double>(std::count(used.begin(), used.end(), true)));
      routings.push_back(Routing{b.device_array(ids), b.device_array(wts), T, k});
    }
    Act x = b.act(T, H), out = b.act(T, H);
    const double mean_touched = std::accumulate(touched.begin(), touched.end(), 0.0) / variants;
    const double us = b.time_us(100, [&](int i) { b.gpu().moe(x, w.layers[0], routings[i % variants], out); });
    b.add(fmt::format("moe{} T={} ({:.0f} experts)", tag, T, mean_touched), "FP8 256 x [1536, 3072]", us,
          mean_touched * expert_bytes, 2.0 * T * k * 3 * I * H);
  }
}

// A cache of random finite values (FP8: codes with scales 1/64).
KvCache random_cache(Bench& b, const KvCacheShape& shape) {
  KvCache cache(shape, b.gpu().allocate(KvCache::storage_bytes(shape)));
  std::vector<uint8_t> bytes(KvCache::storage_bytes(shape));
  const size_t codes = 2ull * shape.num_layers * shape.num_blocks * shape.block_bytes();
  Filler().fill(bytes.data(), codes, shape.dtype);
  for (size_t i = codes; i + 4 <= bytes.size(); i += 4) {
    const float scale = 1.0f / 64;
    std::memcpy(bytes.data() + i, &scale, 4);
  }
  b.gpu().copy_from_host(bytes.data(), cache.k_base(0), bytes.size());
  return cache;
}

// `rows` decode sequences, each over its own `context` cached tokens.
void bench_attention(Bench& b, int64_t context, int64_t rows, DType dtype = DType::kBF16) {
  const int heads = 48, kv_heads = 8, hd = 128, bs = 16;
  const int64_t seq_bytes = 2 * context * kv_heads * (hd * static_cast<int64_t>(dtype_size(dtype)) +
                                                      (dtype == DType::kF8E4M3 ? 4 : 0));  // K and V, one layer
  const int layers = static_cast<int>(std::max<int64_t>(2, kRotateBytes / (seq_bytes * rows)));
  const int64_t per_seq = (context + bs - 1) / bs;
  KvCacheShape shape{layers, kv_heads, hd, bs, per_seq * rows, dtype};
  KvCache cache = random_cache(b, shape);
  std::vector<std::vector<int32_t>> tables(rows);
  std::vector<SeqSlice> seqs;
  for (int64_t r = 0; r < rows; ++r) {
    tables[r].resize(per_seq);
    std::iota(tables[r].begin(), tables[r].end(), static_cast<int32_t>(r * per_seq));
    seqs.push_back({r, 1, context, tables[r]});
  }
  Act q = b.act(rows, heads * hd), out = b.act(rows, heads * hd);
  const double us = b.time_us(100, [&](int i) { b.gpu().attention(q, cache, i % layers, seqs, heads, 0.0883883f, out); });
  b.add(fmt::format("attention decode x{} ctx {}", rows, context), fmt::format("{} KV 48/8 x 128", dtype_name(dtype)),
        us, static_cast<double>(seq_bytes) * rows, 4.0 * rows * heads * context * hd);
}

// One sequence's causal prefill of T tokens (all rows in one step, the
// tensor-core kernel), beside cuBLASLt's BF16 dense rate measured in this
// run (0: not measured). FLOPs: 4 · T²/2 · head_dim · heads (Q Kᵀ and P V
// over the causal half); bytes: q and out (fp32) plus K and V once.
void bench_attention_prefill(Bench& b, int64_t T, DType dtype, double bf16_flops) {
  const int heads = 48, kv_heads = 8, hd = 128, bs = 16;
  KvCacheShape shape{1, kv_heads, hd, bs, (T + bs - 1) / bs, dtype};
  KvCache cache = random_cache(b, shape);
  std::vector<int32_t> table(shape.num_blocks);
  std::iota(table.begin(), table.end(), 0);
  const std::vector<SeqSlice> seqs = {{0, T, T, table}};
  Act q = b.act(T, heads * hd), out = b.act(T, heads * hd);
  const double us = b.time_us(10, [&](int) { b.gpu().attention(q, cache, 0, seqs, heads, 0.0883883f, out); });
  const double flops = 4.0 * T * T / 2 * hd * heads;
  const double bytes = 2.0 * T * heads * hd * 4 + 2.0 * T * kv_heads * hd * dtype_size(dtype);
  b.add(fmt::format("attention prefill T={}", T), fmt::format("{} KV 48/8 x 128", dtype_name(dtype)), us, bytes, flops);
  std::printf("    %.1f TFLOP/s = %s of cuBLASLt BF16 (%.0f TFLOP/s)\n", flops / us / 1e6,
              bf16_flops > 0 ? fmt::format("{:.0f}%", 100.0 * flops / (us * 1e-6) / bf16_flops).c_str() : "n/a (--quick)",
              bf16_flops / 1e12);
}

void bench_route(Bench& b, std::vector<int64_t> tokens) {
  const int64_t E = 256, H = 3072;
  const int layers = static_cast<int>(kRotateBytes / (E * H * 4));
  ModelWeights w;
  w.layers.resize(layers);
  for (auto& L : w.layers) {
    L.router = b.host_tensor(DType::kF32, Shape{E, H});
    L.router_bias = b.host_tensor(DType::kF32, Shape{E});
  }
  b.prepare(w);
  for (int64_t T : tokens) {
    Act x = b.act(T, H);
    Routing r{b.device_array(std::vector<int32_t>(T * 8)), b.device_array(std::vector<float>(T * 8)), T, 8};
    const double us = b.time_us(200, [&](int i) {
      b.gpu().route(x, w.layers[i % layers].router, w.layers[i % layers].router_bias, 8, 1.0f, r);
    });
    b.add(fmt::format("route T={}", T), "F32 [256, 3072] top-8", us, E * H * 4.0, 2.0 * T * E * H);
  }
}

void bench_qk_norm_rope(Bench& b, std::vector<int64_t> tokens) {
  ModelWeights w;
  w.layers.resize(1);
  w.layers[0].q_norm = b.host_tensor(DType::kBF16, Shape{6144});
  w.layers[0].k_norm = b.host_tensor(DType::kBF16, Shape{1024});
  b.prepare(w);
  for (int64_t T : tokens) {
    Act q = b.act(T, 6144), k = b.act(T, 1024);
    std::vector<int32_t> pos(T);
    std::iota(pos.begin(), pos.end(), 1000);
    const double us = b.time_us(200, [&](int) {
      b.gpu().qk_norm_rope(q, k, w.layers[0].q_norm, w.layers[0].k_norm, 1e-6f, pos, RopeParams{128, 64, 5e6});
    });
    b.add(fmt::format("qk_norm_rope T={}", T), "q 6144 + k 1024", us, T * 7168.0 * 8 + 7168 * 2);
  }
}

// The sampling kernel alone (parameters already on the device; the op adds
// their upload and the copy of the results): default-like rows (top-k 40,
// top-p 0.95, T 1) and greedy, over the full vocabulary. Bytes: the logits
// read once.
void bench_sample(Bench& b, std::vector<int64_t> rows_list) {
  const int64_t V = 200064;
  for (int64_t R : rows_list) {
    Act lg = b.act(R, V);
    for (bool greedy : {false, true}) {
      std::vector<cuda::SampleRowArgs> args(R);
      for (int64_t r = 0; r < R; ++r) {
        args[r].inv_temperature = greedy ? 0.0 : 1.0;
        args[r].top_k = 40, args[r].top_p = 0.95f, args[r].seed = r;
      }
      const auto* d_args = b.device_array(args);
      auto* d_out = b.device_array(std::vector<cuda::SampleRowResult>(R));
      const double us = b.time_us(100, [&](int) {
        require(cuda::launch_sample(lg.data, R, V, d_args, nullptr, nullptr, d_out, static_cast<cudaStream_t>(cuda_stream(b.gpu()))),
                "sample");
      });
      b.add(fmt::format("sample {} R={}", greedy ? "greedy" : "top-k/p", R), dims(R, V), us, R * V * 4.0);
    }
  }
}

}  // namespace
}  // namespace m2

namespace m2 {
namespace {
void print_rows(const std::vector<Row>& rows, const CudaCeilings& c) {
  std::printf("\n%-36s %-22s %9s %9s %8s %9s %7s\n", "kernel", "shape", "us", "GB/s", "% copy", "TFLOP/s", "% fp8");
  for (const Row& r : rows) {
    std::printf("%-36s %-22s %9.2f %9.1f %7.0f%% %9.2f %6.1f%%\n", r.name.c_str(), r.shape.c_str(), r.us,
                r.bytes / r.us / 1e3, c.copy_bytes_per_s > 0 ? 100.0 * r.bytes / (r.us * 1e-6) / c.copy_bytes_per_s : 0.0,
                r.flops / r.us / 1e6, c.fp8_flops > 0 ? 100.0 * r.flops / (r.us * 1e-6) / c.fp8_flops : 0.0);
  }
}
}  // namespace
}  // namespace m2

int main(int argc, char** argv) {
  using namespace m2;
  const bool quick = argc > 1 && std::strcmp(argv[1], "--quick") == 0;
  if (cuda_device_count() == 0) {
    std::printf("no CUDA device: nothing to measure\n");
    return 0;
  }
  cudaDeviceProp p{};
  cudaGetDeviceProperties(&p, 0);
  const CudaCeilings c = cuda_measure_ceilings(0, !quick);
  std::printf("device: %s, %d SMs, %.0f MB L2\n", p.name, p.multiProcessorCount, p.l2CacheSize / 1e6);
  std::printf("ceilings measured now: copy %.0f GB/s (read + write), cuBLASLt BF16 %.0f TFLOP/s, FP8 %.0f TFLOP/s\n",
              c.copy_bytes_per_s / 1e9, c.bf16_flops / 1e12, c.fp8_flops / 1e12);
  Bench b;
  bench_gemv_paths(b);
  // T = 64 and 256: the dense products of decode batches (FP8 tensor cores,
  // activations quantised by the call).
  bench_matmul(b, "q_proj", DType::kF8E4M3, 6144, 3072, {1, 4, 64, 256});
  bench_matmul(b, "k_proj", DType::kF8E4M3, 1024, 3072, {1, 64});
  bench_matmul(b, "o_proj", DType::kF8E4M3, 3072, 6144, {1, 4, 64, 256});
  bench_matmul(b, "expert w1", DType::kF8E4M3, 1536, 3072, {1});
  bench_matmul(b, "expert w2", DType::kF8E4M3, 3072, 1536, {1});
  bench_matmul(b, "lm_head", DType::kBF16, 200064, 3072, {1, 4});
  bench_lm_head_gemm(b, " tensor cores", {64, 256}, c.copy_bytes_per_s, c.bf16_flops);
  if (!quick) bench_matmul(b, "q_proj prefill", DType::kF8E4M3, 6144, 3072, {512});
  bench_moe(b, quick ? std::vector<int64_t>{1, 4} : std::vector<int64_t>{1, 4, 16, 64});
  {
    // The decode MoE's SIMT down kernel, which the tensor-core one replaces
    // on sm_90 (the moe_decode_wgmma variant).
    Bench m([](cuda::CudaOptions& o) { o.moe_decode_wgmma = false; });
    bench_moe(m, {1, 4}, " [stream]");
    b.append(m.rows());
  }
  bench_attention(b, 1024, 1);
  bench_attention(b, 1024, 64);
  bench_attention(b, 1024, 256);
  for (int64_t ctx : {4096, 8192, 32768}) bench_attention(b, ctx, 1);  // key splits of 128, 256 and 1024 keys
  bench_attention(b, 1024, 1, DType::kF8E4M3);
  bench_attention(b, 32768, 1, DType::kF8E4M3);
  bench_attention_prefill(b, 8192, DType::kBF16, c.bf16_flops);
  bench_attention_prefill(b, 8192, DType::kF8E4M3, c.bf16_flops);
  bench_route(b, quick ? std::vector<int64_t>{1, 64, 256} : std::vector<int64_t>{1, 64, 256, 2048});
  bench_qk_norm_rope(b, {1, 64});
  if (!quick) {
    // FP8 tensor-core paths, one backend per fp8_gemm mode: dense prefill
    // GEMMs own vs cuBLASLt, grouped MoE on tensor cores vs the
    // fp32-activation SIMT tiles ("off").
    using Variant = void (*)(cuda::CudaOptions&);
    const std::pair<const char*, Variant> modes[] = {
        {"own", [](cuda::CudaOptions& o) { o.fp8_gemm = cuda::Fp8GemmMode::kOwn; }},
        {"cublaslt", [](cuda::CudaOptions& o) { o.fp8_gemm = cuda::Fp8GemmMode::kCublasLt; }},
        {"off", [](cuda::CudaOptions& o) { o.fp8_gemm = cuda::Fp8GemmMode::kOff; }}};
    for (const auto& [mode, variant] : modes) {
      Bench m(variant);
      const std::string tag = fmt::format(" [{}]", mode);
      if (std::strcmp(mode, "off") != 0) {
        bench_matmul(m, ("q_proj" + tag).c_str(), DType::kF8E4M3, 6144, 3072, {512, 2048, 8192});
        bench_matmul(m, ("o_proj" + tag).c_str(), DType::kF8E4M3, 3072, 6144, {512, 2048, 8192});
      }
      if (std::strcmp(mode, "cublaslt") != 0)  // the MoE has no cuBLASLt path
        bench_moe(m, std::strcmp(mode, "off") == 0 ? std::vector<int64_t>{64, 256, 2048}
                                                   : std::vector<int64_t>{64, 256, 2048, 8192}, tag);
      b.append(m.rows());
    }
    // The SIMT kernel the tensor-core lm_head replaces (same byte count: the
    // rows compare times).
    Bench off([](cuda::CudaOptions& o) { o.bf16_gemm = false; });
    bench_lm_head_gemm(off, " [BF16 GEMM off]", {64, 256}, c.copy_bytes_per_s, c.bf16_flops);
    b.append(off.rows());
  }
  // The sampling kernel needs sm_90 code; elsewhere the backend samples on the host.
  const Result<cuda::CudaArch> arch = cuda::probe_cuda_arch(0);
  if (arch.ok() && cuda::cuda_features(arch.value()).gpu_sampling) bench_sample(b, {1, 256});

  print_rows(b.rows(), c);
  return 0;
}
