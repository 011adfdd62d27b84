// The FP8 tensor-core paths (backend/cuda/gemm/fp8_gemm.h): activation
// quantisation, the dense block-scaled GEMM (own mma.sync kernel and
// cuBLASLt) and the grouped MoE experts, against the CPU backend.
//
// Bounds (docs/design.md, "FP8 GEMM"):
//   (a) exactly representable inputs (x in {0, ±1, ±14} with a ±14 in every
//       128-group, so the scale is 14 / 448 = 2^-5 and every code exact;
//       weight codes in {0, ±1} with power-of-two block scales): every
//       partial sum is a small multiple of 2^-11, exact in any order even
//       at 13 bits of tensor-core accumulation -> results must be identical.
//   (b) against the CPU op on the same quantised activations (dequantised
//       from the GPU's own codes and scales): the products are exact on both
//       sides, only the summation differs. Hopper's FP8 tensor cores keep
//       about 14 significant bits while accumulating (DeepSeek-V3 report,
//       §3.3.2); a 128-wide k-block takes 4 k32 steps, so its partial sum
//       may be off by ~4 * 2^-13 = 5e-4 of itself before the fp32 fold
//       -> bound 1e-3 on ‖got − want‖ / ‖want‖.
//   (c) against the CPU op on fp32 activations: e4m3 keeps 3 mantissa bits,
//       so each activation carries a relative rounding error |ε| <= 2^-4
//       (RMS ~0.026 over a binade); with random signs the output's relative
//       L2 error is the RMS of ε, ~0.03 -> bound 2^-4. The MoE quantises
//       twice (x, then the SwiGLU output u): independent errors add in
//       quadrature -> bound sqrt(2) * 2^-4.
//   (d) the CUTLASS MoE (moe_cutlass.cu) against our own grouped kernel:
//       the same x codes; their u = silu(gate) * up differ only by the up
//       GEMMs' summation (relative δ <= (b)'s 1e-3, normwise), and where that
//       moves a value across an e4m3 rounding boundary the code differs by
//       one ulp (<= 2^-3 of the value). A boundary is crossed with
//       probability ~|δ_i| / ulp_i, so E‖Δu‖² <= Σ |δ_i| ulp_i <= 1e-3 · 2^-3
//       ‖u‖²; with the down GEMM's own 1e-3: bound sqrt(1e-3 / 8) + 1e-3 ≈ 0.0122.
// Failures name the worst element (row, column, expected, got).
#include <cuda_runtime.h>

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <numeric>

#include "backend/cuda/gemm/fp8_gemm.h"
#include "backend/cuda/moe/moe.h"
#include "backend/cuda/moe/moe_cutlass.h"
#include "backend/cuda/moe/moe_decode.h"
#include "backend/cuda/runtime/device_caps.h"
#include "../cuda_test_util.h"

namespace m2::test {
namespace {

using cuda::DeviceExperts;
using cuda::DeviceWeight;
using cuda::Fp8GemmMode;
using cuda::Fp8Matmul;

constexpr double kSameInputsBound = 1e-3;        // (b)
constexpr double kQuantBound = 0.0625;           // (c), 2^-4
constexpr double kMoeQuantBound = 0.0884;        // (c), sqrt(2) * 2^-4
constexpr double kMoePathsBound = 0.0122;        // (d)

// Where `got` is furthest from `want` ([rows, cols] row-major), for messages.
std::string worst(const std::vector<float>& got, const std::vector<float>& want, int64_t cols) {
  size_t at = 0, bad = 0;
  double d = -1;
  for (size_t i = 0; i < got.size(); ++i) {
    if (!std::isfinite(got[i])) ++bad;
    const double e = std::isfinite(got[i]) ? std::abs(double(got[i]) - want[i]) : INFINITY;
    if (e > d) d = e, at = i;
  }
  return fmt::format("worst at row {} col {}: expected {} got {} ({} non-finite of {})", at / cols, at % cols,
                     want[at], got[at], bad, got.size());
}

class Fp8Gemm : public CudaTest {
 protected:
  void SetUp() override {
    CudaTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    const Result<cuda::CudaArch> arch = cuda::probe_cuda_arch(0);
    ASSERT_TRUE(arch.ok()) << arch.status().message();
    features_ = cuda::cuda_features(arch.value());
  }
  // A device copy of an FP8 linear (independent of the backend's uploads).
  DeviceWeight upload(const Linear& l) {
    const int64_t N = l.out_features(), K = l.in_features();
    const uint8_t* w = static_cast<const uint8_t*>(l.weight.data);
    const float* s = l.scale_inv.as<float>();
    return DeviceWeight{gpu_array(std::vector<uint8_t>(w, w + N * K)),
                        gpu_array(std::vector<float>(s, s + l.scale_inv.shape.numel())), DType::kF8E4M3, N, K,
                        (K + 127) / 128};
  }
  // Quantises x [T, K] on the GPU; returns the dequantised values q * s.
  std::vector<float> quantize(const float* d_x, int64_t T, int64_t K, uint8_t* q, float* s) {
    EXPECT_EQ(cuda::launch_quantize_fp8(d_x, T, K, K, q, s, stream()), cudaSuccess);
    return dequantize(to_host(q, T * K), to_host(s, T * (K / 128)), T, K);
  }
  // codes [T, K] e4m3 with scales [K / 128, T] (fp8_gemm.h's layout) as values.
  static std::vector<float> dequantize(const std::vector<uint8_t>& codes, const std::vector<float>& scales, int64_t T,
                                       int64_t K) {
    std::vector<float> out(T * K);
    for (int64_t t = 0; t < T; ++t)
      for (int64_t k = 0; k < K; ++k) out[t * K + k] = f8e4m3_to_f32(codes[t * K + k]) * scales[(k / 128) * T + t];
    return out;
  }
  // The CPU on a MoE path's own quantised activations: u[p] = SwiGLU of
  // expert ids[p] on xq [T, H] (before u's quantisation) and out [T, H] =
  // Σ_j rw · W2 uq[p] over uq [P, I], p = t * k + j.
  struct QuantisedReference {
    std::vector<float> u, out;
  };
  QuantisedReference reference_on_quantised(const LayerWeights& L, const std::vector<float>& xq,
                                            const std::vector<float>& uq, const std::vector<int32_t>& ids,
                                            const std::vector<float>& rw, int64_t T, int k, int64_t H, int64_t I) {
    const int64_t P = T * k;
    QuantisedReference r{std::vector<float>(P * I), std::vector<float>(T * H, 0.0f)};
    for (int64_t p = 0; p < P; ++p) {
      const int64_t t = p / k;
      const ExpertWeights& ew = L.experts[ids[p]];
      const std::vector<float> xt(xq.begin() + t * H, xq.begin() + (t + 1) * H);
      const auto g = cpu_matmul(xt, 1, ew.w1), up = cpu_matmul(xt, 1, ew.w3);
      for (int64_t c = 0; c < I; ++c) r.u[p * I + c] = g[c] / (1.0f + std::exp(-g[c])) * up[c];
      const auto y = cpu_matmul(std::vector<float>(uq.begin() + p * I, uq.begin() + (p + 1) * I), 1, ew.w2);
      for (int64_t c = 0; c < H; ++c) r.out[t * H + c] += rw[p] * y[c];
    }
    return r;
  }
  std::vector<float> cpu_matmul(std::vector<float> x, int64_t T, const Linear& w) {
    std::vector<float> y(T * w.out_features());
    cpu_->matmul(host_act(x, T), w, host_act(y, T));
    return y;
  }
  // The experts stacked as DeviceExperts describes them (cuda_weights.cpp's
  // layout), uploaded independently of the backend.
  DeviceExperts upload_experts(const LayerWeights& L) {
    const int64_t E = static_cast<int64_t>(L.experts.size());
    const int64_t I = L.experts[0].w1.out_features(), H = L.experts[0].w1.in_features();
    auto a256 = [](int64_t b) { return (b + 255) / 256 * 256; };
    DeviceExperts d;
    d.num_experts = E, d.hidden = H, d.intermediate = I;
    d.scale_off13 = a256(I * H), d.stride13 = a256(d.scale_off13 + (I / 128) * (H / 128) * 4);
    d.scale_off2 = a256(H * I), d.stride2 = a256(d.scale_off2 + (H / 128) * (I / 128) * 4);
    std::vector<uint8_t> b1(d.stride13 * E), b3(d.stride13 * E), b2(d.stride2 * E);
    auto put = [](std::vector<uint8_t>& b, int64_t at, int64_t scale_off, const Linear& l) {
      std::memcpy(b.data() + at, l.weight.data, l.weight.nbytes());
      std::memcpy(b.data() + at + scale_off, l.scale_inv.data, l.scale_inv.nbytes());
    };
    for (int64_t e = 0; e < E; ++e) {
      put(b1, e * d.stride13, d.scale_off13, L.experts[e].w1);
      put(b3, e * d.stride13, d.scale_off13, L.experts[e].w3);
      put(b2, e * d.stride2, d.scale_off2, L.experts[e].w2);
    }
    d.w1 = gpu_array(b1), d.w3 = gpu_array(b3), d.w2 = gpu_array(b2);
    return d;
  }
  // cuBLASLt without an algorithm for a shape is not an error (the backend
  // then runs the own kernel, logged), but it is reported.
  static void expect_lt_ran(cudaError_t e, const std::string& what) {
    if (e == cudaErrorNotSupported)
      std::printf("  NOTE cuBLASLt has no block-scaled FP8 algorithm for %s\n", what.c_str());
    else
      EXPECT_EQ(e, cudaSuccess) << "cuBLASLt " << what << ": " << cudaGetErrorString(e);
  }
  // Whether the backend ops take the FP8 paths (fp8_gemm is not off and the
  // device runs the kernels).
  bool ops_use_fp8() const {
    return cuda::fp8_gemm_mode_for(test_options().fp8_gemm, features_) != Fp8GemmMode::kOff;
  }
  // Whether the backend's moe op takes the CUTLASS path.
  bool ops_use_cutlass() const { return ops_use_fp8() && features_.cutlass_moe && test_options().moe_cutlass; }
  // Top-k routing over E experts, skewed: expert 0 in every token (most
  // pairs), the experts in `unused` in none, the rest weighted E - e (low
  // ids more often); normalised positive weights.
  void skewed_routing(HostTensors& h, int64_t T, int E, int k, const std::vector<int32_t>& unused,
                      std::vector<int32_t>& ids, std::vector<float>& rw) {
    ids.assign(T * k, 0);
    rw.assign(T * k, 0.0f);
    std::vector<int32_t> pool;
    for (int32_t e = 1; e < E; ++e)
      if (std::find(unused.begin(), unused.end(), e) == unused.end())
        for (int r = 0; r < E - e; ++r) pool.push_back(e);
    for (int64_t t = 0; t < T; ++t) {
      std::vector<int32_t> chosen = {0};
      while (static_cast<int>(chosen.size()) < k) {
        const int32_t e = pool[h.rng()() % pool.size()];
        if (std::find(chosen.begin(), chosen.end(), e) == chosen.end()) chosen.push_back(e);
      }
      std::shuffle(chosen.begin(), chosen.end(), h.rng());  // expert 0 in any slot
      float sum = 0;
      for (int j = 0; j < k; ++j) ids[t * k + j] = chosen[j], sum += rw[t * k + j] = 0.1f + std::abs(h.normal());
      for (int j = 0; j < k; ++j) rw[t * k + j] /= sum;
    }
  }
  cuda::CudaFeatures features_;
};

// Below sm_89 code or without their shared memory the kernels trap, and the
// backend never launches them (device_caps.h).
constexpr const char* kNoFp8Kernels = "this device cannot run the FP8 tensor-core kernels (device_caps.h)";

TEST_F(Fp8Gemm, QuantizationMatchesCpuRule) {
  HostTensors h(21);
  for (auto [T, K] : {std::pair<int64_t, int64_t>{1, 128}, {17, 3072}, {333, 1536}}) {
    auto x = h.randn(T * K, 3.0f);
    for (int64_t k = 0; k < 128; ++k) x[k] = 0.0f;                     // an all-zero group
    if (T > 1) x[K + 5] = 1e4f, x[K + 6] = -1e-6f;                      // a wide group
    uint8_t* q = scratch<uint8_t>(T * K);
    float* s = scratch<float>(T * (K / 128));
    ASSERT_EQ(cuda::launch_quantize_fp8(to_gpu(x, T).data, T, K, K, q, s, stream()), cudaSuccess);
    const auto codes = to_host(q, T * K);
    const auto scales = to_host(s, T * (K / 128));
    int bad = 0;
    for (int64_t t = 0; t < T; ++t)
      for (int64_t kb = 0; kb < K / 128; ++kb) {
        float amax = 0;
        for (int64_t k = kb * 128; k < kb * 128 + 128; ++k) amax = std::max(amax, std::abs(x[t * K + k]));
        const float sc = amax / 448.0f;
        EXPECT_EQ(scales[kb * T + t], sc) << "scale of row " << t << " block " << kb << " (T " << T << ")";
        for (int64_t k = kb * 128; k < kb * 128 + 128 && bad < 5; ++k) {
          const uint8_t want = sc > 0 ? f32_to_f8e4m3(x[t * K + k] / sc) : 0;
          if (codes[t * K + k] != want)
            ADD_FAILURE() << "code of row " << t << " col " << k << ": value " << x[t * K + k] << " expected 0x"
                          << std::hex << int(want) << " got 0x" << int(codes[t * K + k]) << std::dec, ++bad;
        }
      }
  }
}

// A linear whose codes are in {0, ±1} (e4m3 0x38 = 1) and block scales
// powers of two in [2^-6, 2^-4]; and activations of case (a).
Linear exact_linear(HostTensors& h, int64_t N, int64_t K) {
  std::vector<float> codes(N * K), scales(((N + 127) / 128) * ((K + 127) / 128));
  for (float& c : codes) c = static_cast<float>(static_cast<int>(h.rng()() % 3) - 1);
  for (float& s : scales) s = std::ldexp(1.0f, -4 - static_cast<int>(h.rng()() % 3));
  Linear l;
  l.weight = h.store(codes, DType::kF8E4M3, Shape{N, K});
  l.scale_inv = h.store(scales, DType::kF32, Shape{(N + 127) / 128, (K + 127) / 128});
  return l;
}
std::vector<float> exact_activations(HostTensors& h, int64_t T, int64_t K) {
  std::vector<float> x(T * K);
  for (float& v : x) v = static_cast<float>(static_cast<int>(h.rng()() % 3) - 1);
  for (int64_t t = 0; t < T; ++t)
    for (int64_t kb = 0; kb < K / 128; ++kb) x[t * K + kb * 128 + (t * 7 + kb * 13) % 128] = (t + kb) % 2 ? 14.0f : -14.0f;
  return x;
}

TEST_F(Fp8Gemm, ExactlyRepresentableInputsGiveExactResults) {
  if (!features_.fp8_gemm_own) GTEST_SKIP() << kNoFp8Kernels;
  HostTensors h(22);
  Fp8Matmul lt(Fp8GemmMode::kCublasLt);
  for (auto [N, K] : {std::pair<int64_t, int64_t>{1024, 3072}, {3072, 1536}}) {
    const Linear l = exact_linear(h, N, K);
    const DeviceWeight d = upload(l);
    ModelWeights w;
    w.lm_head = l;
    prepare(w);
    for (int64_t T : {1, 17, 128, 333}) {
      const auto x = exact_activations(h, T, K);
      const auto want = cpu_matmul(x, T, l);  // exact too: the same argument holds for fp32 in any order
      Act gx = to_gpu(x, T);
      uint8_t* q = scratch<uint8_t>(T * K);
      float* s = scratch<float>(T * (K / 128));
      ASSERT_EQ(quantize(gx.data, T, K, q, s), x) << "quantisation of exact inputs, T " << T;
      Act own = poisoned(T, N), viaLt = poisoned(T, N), op = poisoned(T, N);
      ASSERT_EQ(cuda::launch_fp8_gemm(q, s, T, d, own.data, N, stream()), cudaSuccess);
      const auto got_own = to_host(own);
      EXPECT_EQ(max_abs_diff(got_own, want), 0.0) << "own [" << N << ", " << K << "] T " << T << ": "
                                                   << worst(got_own, want, N);
      const cudaError_t e = lt.run_cublaslt(q, s, T, d, viaLt.data, N, stream());
      expect_lt_ran(e, fmt::format("[{}, {}] T {}", N, K, T));
      if (e == cudaSuccess) {
        const auto got_lt = to_host(viaLt);
        EXPECT_EQ(max_abs_diff(got_lt, want), 0.0) << "cuBLASLt [" << N << ", " << K << "] T " << T << ": "
                                                    << worst(got_lt, want, N);
      }
      if (T >= cuda::kFp8GemmMinTokens && ops_use_fp8()) {  // the backend op (the fp8_gemm option's kernel)
        gpu_->matmul(gx, w.lm_head, op);
        const auto got_op = to_host(op);
        EXPECT_EQ(max_abs_diff(got_op, want), 0.0) << "matmul op [" << N << ", " << K << "] T " << T << ": "
                                                    << worst(got_op, want, N);
      }
    }
  }
}

TEST_F(Fp8Gemm, DenseMatchesCpuOnQuantizedAndFp32Activations) {
  if (!features_.fp8_gemm_own) GTEST_SKIP() << kNoFp8Kernels;
  HostTensors h(23);
  Fp8Matmul lt(Fp8GemmMode::kCublasLt);
  struct Case {
    int64_t N, K;
    std::vector<int64_t> tokens;
  };
  const std::vector<Case> cases = {
      {6144, 3072, {1, 17, 128, 333, 2048}},  // q_proj
      {1024, 3072, {1, 17, 333}},             // k/v_proj
      {3072, 6144, {17, 128, 333}},           // o_proj
      {1536, 3072, {64, 333}},                // expert w1 / w3
      {3072, 1536, {64, 333}},                // expert w2
  };
  for (const Case& c : cases) {
    ModelWeights w;
    w.lm_head = h.linear(DType::kF8E4M3, c.N, c.K);
    const DeviceWeight d = upload(w.lm_head);
    prepare(w);
    for (int64_t T : c.tokens) {
      const std::string what = fmt::format("[{}, {}] T {}", c.N, c.K, T);
      const auto x = h.randn(T * c.K);
      Act gx = to_gpu(x, T);
      uint8_t* q = scratch<uint8_t>(T * c.K);
      float* s = scratch<float>(T * (c.K / 128));
      const auto xq = quantize(gx.data, T, c.K, q, s);
      const auto want_q = cpu_matmul(xq, T, w.lm_head);
      const auto want = cpu_matmul(x, T, w.lm_head);

      Act own = poisoned(T, c.N), viaLt = poisoned(T, c.N);
      ASSERT_EQ(cuda::launch_fp8_gemm(q, s, T, d, own.data, c.N, stream()), cudaSuccess) << what;
      const auto got_own = to_host(own);
      const double eb = rel_error(got_own, want_q), ec = rel_error(got_own, want);
      EXPECT_LE(eb, kSameInputsBound) << "own vs CPU on the same FP8 activations " << what << ": "
                                      << worst(got_own, want_q, c.N);
      EXPECT_LE(ec, kQuantBound) << "own vs CPU on fp32 activations " << what << ": " << worst(got_own, want, c.N);
      const cudaError_t e = lt.run_cublaslt(q, s, T, d, viaLt.data, c.N, stream());
      expect_lt_ran(e, what);
      double elt = -1;
      if (e == cudaSuccess) {
        const auto got_lt = to_host(viaLt);
        elt = rel_error(got_lt, want_q);
        EXPECT_LE(elt, kSameInputsBound) << "cuBLASLt vs CPU on the same FP8 activations " << what << ": "
                                         << worst(got_lt, want_q, c.N);
      }
      if (T >= cuda::kFp8GemmMinTokens && ops_use_fp8()) {
        Act op = poisoned(T, c.N);
        gpu_->matmul(gx, w.lm_head, op);
        const auto got_op = to_host(op);
        EXPECT_LE(rel_error(got_op, want_q), kSameInputsBound) << "matmul op " << what << ": "
                                                               << worst(got_op, want_q, c.N);
      }
      std::printf("  %s: own %.2e (same inputs) %.2e (fp32 inputs), cuBLASLt %.2e\n", what.c_str(), eb, ec, elt);
    }
  }
}

// Unbalanced routing over 16 experts of the real shapes: expert 0 in every
// token (the most pairs, several tiles), experts 5 and 9 in none, the rest
// skewed toward low ids.
TEST_F(Fp8Gemm, GroupedMoeMatchesCpuWithUnbalancedExperts) {
  if (!features_.fp8_moe) GTEST_SKIP() << kNoFp8Kernels;
  HostTensors h(24);
  const int64_t H = 3072, I = 1536;
  const int E = 16, k = 8;
  ModelWeights w;
  LayerWeights& L = random_fp8_experts(h, w, E, H, I);
  const DeviceExperts dx = upload_experts(L);
  prepare(w);
  for (int64_t T : {9, 40, 333}) {
    std::vector<int32_t> ids;
    std::vector<float> rw;
    skewed_routing(h, T, E, k, {5, 9}, ids, rw);
    const std::string what = fmt::format("T {} ({} pairs)", T, T * k);
    auto x = h.randn(T * H);
    Act gx = to_gpu(x, T), out = poisoned(T, H);
    cuda::MoeArgs a;
    a.x = gx.data, a.T = T, a.experts = dx, a.top_k = k, a.out = out.data;
    a.expert_ids = gpu_array(ids), a.weights = gpu_array(rw);
    void* scr = scratch<uint8_t>(cuda::moe_scratch_bytes(T, k, H, I, E, false));
    a.scratch = scr;  // our own grouped kernel (use_cutlass false)
    ASSERT_EQ(cuda::launch_moe(a, stream()), cudaSuccess) << what;
    const auto got = to_host(out);

    // The GPU's quantised activations (x8, sx) and SwiGLU outputs (u8, su).
    const cuda::MoeFp8Scratch s = cuda::moe_fp8_carve(scr, T, k, H, I);
    const int64_t P = T * k;
    const auto x8 = to_host(s.x8, T * H), u8 = to_host(s.u8, P * I);
    const auto sx = to_host(s.sx, T * (H / 128)), su = to_host(s.su, P * (I / 128));
    const std::vector<float> xq = dequantize(x8, sx, T, H), uq = dequantize(u8, su, P, I);
    const auto [u_cpu, want_q] = reference_on_quantised(L, xq, uq, ids, rw, T, k, H, I);
    int scale_errors = 0;
    for (int64_t p = 0; p < P; ++p)
      for (int64_t kb = 0; kb < I / 128; ++kb) {  // su = amax / 448 of the pair's block
        float amax = 0;
        for (int64_t c = kb * 128; c < kb * 128 + 128; ++c) amax = std::max(amax, std::abs(u_cpu[p * I + c]));
        const float want_s = amax / 448.0f, got_s = su[kb * P + p];
        if (!(std::abs(got_s - want_s) <= kSameInputsBound * want_s) && scale_errors++ < 5)
          ADD_FAILURE() << what << ": u scale of pair " << p << " (expert " << ids[p] << ") block " << kb
                        << " expected " << want_s << " got " << got_s;
      }
    // u: one e4m3 rounding (<= 2^-4 relative) on top of the up GEMM.
    EXPECT_LE(rel_error(uq, u_cpu), kQuantBound) << what << " SwiGLU output u: " << worst(uq, u_cpu, I);
    // The down GEMM and combine on the GPU's own u (CPU sums in expert
    // order, the GPU in slot order: fp32 reordering only).
    EXPECT_LE(rel_error(got, want_q), kSameInputsBound) << what << " vs CPU on the GPU's quantised u: "
                                                        << worst(got, want_q, H);
    std::vector<float> want(T * H);
    cpu_->moe(host_act(x, T), L, Routing{ids.data(), rw.data(), T, k},
              host_act(want, T));
    EXPECT_LE(rel_error(got, want), kMoeQuantBound) << what << " vs CPU on fp32 activations: " << worst(got, want, H);
    if (ops_use_fp8()) {
      Act op = poisoned(T, H);  // the backend op takes this path, or CUTLASS's on sm_90 (bound (d))
      gpu_->moe(gx, L, Routing{gpu_array(ids), gpu_array(rw), T, k}, op);
      const auto got_op = to_host(op);
      EXPECT_LE(rel_error(got_op, want_q), ops_use_cutlass() ? kMoePathsBound : kSameInputsBound)
          << what << " moe op: " << worst(got_op, want_q, H);
    }
    std::printf("  moe %s: %.2e (same u) %.2e (fp32), u %.2e\n", what.c_str(), rel_error(got, want_q),
                rel_error(got, want), rel_error(uq, u_cpu));
  }
}

// The decode MoE's down pass on tensor cores (moe_decode_wgmma.cu: FP8
// weights as exact f16, u as f16 hi + lo after a power-of-two scaling per
// row) keeps the fp32 bound of the SIMT streaming kernel it replaces
// (tests/backend/ops_conformance_test.cpp: 2e-5), for tokens whose activations differ by 2^20 in
// magnitude; a second launch gives the same bits (the per-tile counters are
// left zero, the slot-order sum does not depend on which block finishes
// last); the backend op takes this path.
TEST_F(Fp8Gemm, DecodeMoeDownOnTensorCoresKeepsFp32Accuracy) {
  if (!features_.wgmma) GTEST_SKIP() << "no wgmma kernels here (sm_90a code on an sm_90 device)";
  struct Case {
    int E, k;
    int64_t H, I;
    std::vector<int64_t> tokens;
  };
  const std::vector<Case> cases = {
      {16, 8, 3072, 1536, {1, 3, 8}},  // M2's shapes; 8 tokens = 64 pairs, the most
      {12, 10, 256, 128, {1, 6}},      // one scale block of I; 10 slots
      {8, 4, 7168, 384, {2}},          // 112 tiles a pair
  };
  for (const Case& c : cases) {
    HostTensors h(71 + c.E);
    const int64_t H = c.H, I = c.I;
    const int E = c.E, k = c.k;
    ModelWeights w;
    LayerWeights& L = random_fp8_experts(h, w, E, H, I);
    const DeviceExperts dx = upload_experts(L);
    prepare(w);
    for (int64_t T : c.tokens) {
      std::vector<int32_t> ids;
      std::vector<float> rw;
      skewed_routing(h, T, E, k, {}, ids, rw);
      const std::string what = fmt::format("E {} k {} H {} I {} T {}", E, k, H, I, T);
      auto x = h.randn(T * H);
      for (int64_t t = 0; t < T; ++t)  // token t's u ~ 2^(20 (t % 3 - 1)) (u is quadratic in x)
        for (int64_t i = 0; i < H; ++i) x[t * H + i] = std::ldexp(x[t * H + i], 10 * static_cast<int>(t % 3 - 1));
      Act gx = to_gpu(x, T), out = poisoned(T, H), again = poisoned(T, H), simt = poisoned(T, H);
      cuda::MoeArgs a;
      a.x = gx.data, a.T = T, a.experts = dx, a.top_k = k, a.num_sms = num_sms();
      a.expert_ids = gpu_array(ids), a.weights = gpu_array(rw);
      a.wgmma_decode = true;
      const int64_t n_counters = cuda::moe_decode_counter_count(T, H);
      a.counters = gpu_array(std::vector<unsigned>(n_counters, 0u));
      a.scratch = scratch<uint8_t>(cuda::moe_scratch_bytes(T, k, H, I, E, false));
      a.out = out.data;
      ASSERT_EQ(cuda::launch_moe(a, stream()), cudaSuccess) << what;
      a.out = again.data;
      ASSERT_EQ(cuda::launch_moe(a, stream()), cudaSuccess) << what << " again";
      a.wgmma_decode = false, a.out = simt.data;
      ASSERT_EQ(cuda::launch_moe(a, stream()), cudaSuccess) << what << " SIMT";
      const auto got = to_host(out), got_again = to_host(again), got_simt = to_host(simt);
      EXPECT_TRUE(std::equal(got.begin(), got.end(), got_again.begin())) << what << ": the second launch differs";
      EXPECT_EQ(to_host(a.counters, n_counters), std::vector<unsigned>(n_counters, 0u)) << what << ": counters left";
      std::vector<float> want(T * H);
      cpu_->moe(host_act(x, T), L, Routing{ids.data(), rw.data(), T, k}, host_act(want, T));
      for (int64_t t = 0; t < T; ++t) {  // per token: their magnitudes differ by 2^20
        const std::vector<float> g(got.begin() + t * H, got.begin() + (t + 1) * H),
            s2(got_simt.begin() + t * H, got_simt.begin() + (t + 1) * H),
            c2(want.begin() + t * H, want.begin() + (t + 1) * H);
        EXPECT_LE(rel_error(g, c2), 2e-5) << what << " token " << t << ": " << worst(g, c2, H);
        EXPECT_LE(rel_error(s2, c2), 2e-5) << what << " token " << t << " (SIMT): " << worst(s2, c2, H);
      }
      if (test_options().moe_decode_wgmma) {
        Act op = poisoned(T, H);
        gpu_->moe(gx, L, Routing{gpu_array(ids), gpu_array(rw), T, k}, op);
        const auto got_op = to_host(op);
        EXPECT_TRUE(std::equal(got_op.begin(), got_op.end(), got.begin())) << what << ": the moe op differs";
      }
      std::printf("  decode moe %s: %.2e (tensor-core W2) %.2e (SIMT)\n", what.c_str(), rel_error(got, want),
                  rel_error(got_simt, want));
    }
  }
}

// The CUTLASS grouped MoE (moe_cutlass.cu) on unbalanced routing: 16 experts
// of the real shapes, then more experts at smaller multiples of 128, the
// last with enough pairs for the cooperative up GEMM; expert
// 0 in every token, some experts in none. Against the CPU on fp32
// activations (c), on the path's own quantised SwiGLU output (b: checks the
// down GEMM, its per-expert scale blocks and the combine), and against our
// own grouped kernel on the same inputs (d).
TEST_F(Fp8Gemm, CutlassMoeMatchesCpuAndOwnKernel) {
  if (!features_.cutlass_moe) GTEST_SKIP() << "no CUTLASS MoE here (a CUTLASS build and an sm_90 device)";
  struct Case {
    int E;
    int64_t H, I, T;
  };
  const int k = 8;
  const Case cooperative{32, 512, 256, cuda::kMoeCutlassCooperativeMinPairs / k};
  for (const Case c : {Case{16, 3072, 1536, 9}, Case{64, 1024, 512, 64}, Case{256, 512, 256, 300}, cooperative}) {
    HostTensors h(41 + c.E);
    const int64_t H = c.H, I = c.I, T = c.T, P = T * k;
    const int E = c.E;
    ModelWeights w;
    LayerWeights& L = random_fp8_experts(h, w, E, H, I);
    const DeviceExperts dx = upload_experts(L);
    prepare(w);
    std::vector<int32_t> ids;
    std::vector<float> rw;
    skewed_routing(h, T, E, k, {3, E / 2, E - 1}, ids, rw);
    const std::string what = fmt::format("E {} H {} I {} T {} ({} pairs)", E, H, I, T, P);
    auto x = h.randn(T * H);
    Act gx = to_gpu(x, T), out_c = poisoned(T, H), out_own = poisoned(T, H);
    cuda::MoeArgs a;
    a.x = gx.data, a.T = T, a.experts = dx, a.top_k = k;
    a.expert_ids = gpu_array(ids), a.weights = gpu_array(rw), a.num_sms = num_sms();
    a.out = out_own.data, a.use_cutlass = false;
    a.scratch = scratch<uint8_t>(cuda::moe_scratch_bytes(T, k, H, I, E, false));
    ASSERT_EQ(cuda::launch_moe(a, stream()), cudaSuccess) << what << " own kernel";
    void* scr = scratch<uint8_t>(cuda::moe_scratch_bytes(T, k, H, I, E, true));
    a.out = out_c.data, a.use_cutlass = true, a.scratch = scr;
    ASSERT_EQ(cuda::launch_moe(a, stream()), cudaSuccess) << what << " CUTLASS";
    const auto got = to_host(out_c), own = to_host(out_own);

    // The CUTLASS path's quantised SwiGLU output: row row_of_pair[p] of A2,
    // scales in expert blocks [I / 128, M_e] at first[e] * I / 128.
    const cuda::MoeFp8Scratch f = cuda::moe_fp8_carve(scr, T, k, H, I);
    const cuda::MoeCutlassScratch cs =
        cuda::moe_cutlass_carve(static_cast<uint8_t*>(scr) + cuda::moe_fp8_scratch_bytes(T, k, H, I), T, k, H, I, E);
    const auto first = to_host(cs.first, E + 1), row = to_host(cs.row_of_pair, P);
    const auto a2 = to_host(f.u8, P * I), x8 = to_host(f.x8, T * H);
    const auto sfa2 = to_host(f.su, P * (I / 128)), sx = to_host(f.sx, T * (H / 128));
    std::vector<int64_t> count(E, 0);
    for (int32_t e : ids) ++count[e];
    for (int e = 0; e < E; ++e) ASSERT_EQ(first[e + 1] - first[e], count[e]) << what << " expert " << e;
    const std::vector<float> xq = dequantize(x8, sx, T, H);
    std::vector<float> uq(P * I);
    for (int64_t p = 0; p < P; ++p) {
      const int64_t r = row[p], e = ids[p], m = r - first[e];
      ASSERT_TRUE(m >= 0 && m < count[e]) << what << ": pair " << p << " in row " << r << ", not expert " << e << "'s";
      for (int64_t col = 0; col < I; ++col)
        uq[p * I + col] = f8e4m3_to_f32(a2[r * I + col]) * sfa2[first[e] * (I / 128) + (col / 128) * count[e] + m];
    }
    const auto [u_cpu, want_q] = reference_on_quantised(L, xq, uq, ids, rw, T, k, H, I);
    EXPECT_LE(rel_error(uq, u_cpu), kQuantBound) << what << " SwiGLU output u: " << worst(uq, u_cpu, I);
    EXPECT_LE(rel_error(got, want_q), kSameInputsBound) << what << " vs CPU on the path's own u: "
                                                        << worst(got, want_q, H);
    std::vector<float> want(T * H);
    cpu_->moe(host_act(x, T), L, Routing{ids.data(), rw.data(), T, k}, host_act(want, T));
    EXPECT_LE(rel_error(got, want), kMoeQuantBound) << what << " vs CPU on fp32 activations: " << worst(got, want, H);
    EXPECT_LE(rel_error(got, own), kMoePathsBound) << what << " vs our own kernel: " << worst(got, own, H);
    if (ops_use_cutlass()) {
      Act op = poisoned(T, H);  // the backend op takes this path
      gpu_->moe(gx, L, Routing{gpu_array(ids), gpu_array(rw), T, k}, op);
      const auto got_op = to_host(op);
      EXPECT_LE(rel_error(got_op, got), kSameInputsBound) << what << " moe op: " << worst(got_op, got, H);
    }
    std::printf("  cutlass moe %s: %.2e (same u) %.2e (fp32) %.2e (own kernel), u %.2e\n", what.c_str(),
                rel_error(got, want_q), rel_error(got, want), rel_error(got, own), rel_error(uq, u_cpu));
  }
}

// A recorded CUTLASS MoE replays to the eager result on routing written into
// the same device arrays after recording: nothing of the routing is known on
// the host, every argument array is written by device code.
TEST_F(Fp8Gemm, CutlassMoeReplaysFromAGraphOnNewRouting) {
  if (!features_.cutlass_moe) GTEST_SKIP() << "no CUTLASS MoE here (a CUTLASS build and an sm_90 device)";
  HostTensors h(52);
  const int64_t H = 1024, I = 512, T = 40;
  const int E = 32, k = 8;
  ModelWeights w;
  LayerWeights& L = random_fp8_experts(h, w, E, H, I);
  std::vector<int32_t> ids1, ids2;
  std::vector<float> rw1, rw2;
  skewed_routing(h, T, E, k, {7}, ids1, rw1);
  skewed_routing(h, T, E, k, {1, 2, 30}, ids2, rw2);
  Act gx = to_gpu(h.randn(T * H), T), eager = poisoned(T, H), replay = poisoned(T, H);
  cuda::MoeArgs a;
  a.x = gx.data, a.T = T, a.experts = upload_experts(L), a.top_k = k, a.num_sms = num_sms(), a.use_cutlass = true;
  a.expert_ids = gpu_array(ids2), a.weights = gpu_array(rw2);
  a.scratch = scratch<uint8_t>(cuda::moe_scratch_bytes(T, k, H, I, E, true));
  a.out = eager.data;
  ASSERT_EQ(cuda::launch_moe(a, stream()), cudaSuccess);
  const auto want = to_host(eager);
  // Record on routing 1, then write routing 2 into the same arrays and replay.
  int32_t* d_ids = gpu_array(ids1);
  float* d_rw = gpu_array(rw1);
  a.expert_ids = d_ids, a.weights = d_rw, a.out = replay.data;
  cudaGraph_t graph = nullptr;
  ASSERT_EQ(cudaStreamBeginCapture(stream(), cudaStreamCaptureModeGlobal), cudaSuccess);
  const cudaError_t e = cuda::launch_moe(a, stream());
  ASSERT_EQ(cudaStreamEndCapture(stream(), &graph), cudaSuccess);
  ASSERT_EQ(e, cudaSuccess);
  cudaGraphExec_t exec = nullptr;
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  gpu_->copy_from_host(ids2.data(), d_ids, ids2.size() * sizeof(int32_t));
  gpu_->copy_from_host(rw2.data(), d_rw, rw2.size() * sizeof(float));
  ASSERT_EQ(cudaGraphLaunch(exec, stream()), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(stream()), cudaSuccess);
  // Each output row's products do not depend on where in its expert's group
  // the pair landed (the grouping's order inside an expert is arbitrary):
  // identical results.
  EXPECT_EQ(max_abs_diff(to_host(replay), want), 0.0) << "graph replay vs eager call";
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
}

}  // namespace
}  // namespace m2::test
