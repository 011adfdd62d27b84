// FP8 copies of activations written by their producers (fp8_act_copy.h):
//   - the RMSNorm and prefill-attention kernels write, beside an unchanged
//     fp32 output, the e4m3 codes and scales launch_quantize_fp8 writes from
//     that output, byte for byte;
//   - the backend's FP8 products reading those copies (q|k|v, o_proj, the
//     MoE) give bit for bit what they give quantising for themselves
//     (fused_quant=off), and decode sizes (<= 16 tokens) make none;
//   - a product uses a copy only when handed the latest one (ActCopy), of
//     its own input (not another view of the same memory);
//   - the whole model, prefill and decode steps (recorded graphs included),
//     gives the unfused logits bit for bit.
// Everything here is compared for equality: the same kernels run on the same
// bytes, only the quantisation kernel is skipped.
#include <cuda_runtime.h>

#include <fmt/format.h>

#include <array>
#include <cstring>
#include <numeric>

#include "backend/cuda/attention/attention_prefill.h"
#include "backend/cuda/runtime/device_caps.h"
#include "backend/cuda/gemm/fp8_gemm.h"
#include "backend/cuda/attention/attention.h"
#include "backend/cuda/elementwise/elementwise.h"
#include "../cuda_test_util.h"
#include "model/minimax_m2.h"

namespace m2::test {
namespace {

// A CUDA backend with the fused_quant variant `value` (null: the default, on)
// and `kernels` (fp8_gemm, moe_cutlass), without sync (which turns step
// graphs off).
std::unique_ptr<Backend> backend_with_fused_quant(const char* value, const std::string& kernels = "") {
  cuda::CudaOptions o = test_options(kernels);
  o.fused_quant = !value || std::string_view(value) != "off";
  o.sync_each_op = false;
  return make_cuda_backend(0, o);
}

// Whether this device and environment run the FP8 tensor-core paths at all.
bool fp8_paths_on(cuda::CudaFeatures* features = nullptr) {
  const Result<cuda::CudaArch> arch = cuda::probe_cuda_arch(0);
  if (!arch.ok()) return false;
  const cuda::CudaFeatures f = cuda::cuda_features(arch.value());
  if (features) *features = f;
  return cuda::fp8_gemm_mode_for(test_options().fp8_gemm, f) != cuda::Fp8GemmMode::kOff;
}
constexpr const char* kNoFp8 = "no FP8 tensor-core paths here (device or fp8_gemm=off)";

// One backend with its own device memory: inputs go up through its own
// stream (two backends' streams are not ordered with each other).
struct Side {
  std::unique_ptr<Backend> b;
  std::vector<std::shared_ptr<void>> mem;

  Act act(const std::vector<float>& v, int64_t rows) { return upload_act(*b, mem, v, rows); }
  Act nan_act(int64_t rows, int64_t cols) {
    return act(std::vector<float>(rows * cols, std::numeric_limits<float>::quiet_NaN()), rows);
  }
  std::vector<float> host(const Act& a) { return download_act(*b, a); }
  int64_t uses() { return cuda_fp8_copies_used(*b); }
};

// A backend with the fusion (index 0) and one with the fused_quant variant off (1).
std::array<Side, 2> fused_and_unfused(const std::string& kernels = "") {
  return {Side{backend_with_fused_quant(nullptr, kernels), {}}, Side{backend_with_fused_quant("off", kernels), {}}};
}

// Layer L prepared on both sides (weights[i] holds side i's device copies).
void prepare_layer(std::array<Side, 2>& sides, std::array<ModelWeights, 2>& weights, const LayerWeights& L) {
  for (int i = 0; i < 2; ++i) {
    ASSERT_TRUE(sides[i].b);
    weights[i].layers = {L};
    ASSERT_TRUE(sides[i].b->prepare_weights(weights[i]).ok());
  }
}

// Bitwise equality of float vectors (NaN payloads included), naming the first difference.
::testing::AssertionResult same_bits(const std::vector<float>& got, const std::vector<float>& want) {
  if (got.size() != want.size()) return ::testing::AssertionFailure() << "sizes " << got.size() << " vs " << want.size();
  for (size_t i = 0; i < got.size(); ++i)
    if (std::memcmp(&got[i], &want[i], sizeof(float)) != 0)
      return ::testing::AssertionFailure() << "element " << i << ": " << got[i] << " vs " << want[i];
  return ::testing::AssertionSuccess();
}

class FusedQuant : public CudaTest {
 protected:
  // The codes [T, K] and scales [K / 128, T] of an FP8 copy.
  struct Codes {
    std::vector<uint8_t> q;
    std::vector<float> s;
  };
  // Buffers for a copy of [T, K], filled with NaN codes (0x7f) and NaN scales.
  cuda::Fp8Out poisoned_copy(int64_t T, int64_t K) {
    return {gpu_array(std::vector<uint8_t>(T * K, 0x7f)),
            gpu_array(std::vector<float>(T * (K / 128), std::numeric_limits<float>::quiet_NaN()))};
  }
  Codes read(const cuda::Fp8Out& c, int64_t T, int64_t K) { return {to_host(c.q, T * K), to_host(c.s, T * (K / 128))}; }
  // launch_quantize_fp8 of the device activation a [T, K].
  Codes quantize(const Act& a) {
    const cuda::Fp8Out c = poisoned_copy(a.rows, a.cols);
    EXPECT_EQ(cuda::launch_quantize_fp8(a.data, a.rows, a.cols, a.cols, c.q, c.s, stream()), cudaSuccess);
    return read(c, a.rows, a.cols);
  }
  static void expect_same(const Codes& got, const Codes& want, int64_t T, int64_t K, const std::string& what) {
    int bad = 0;
    for (size_t i = 0; i < want.q.size() && bad < 5; ++i)
      if (got.q[i] != want.q[i])
        ADD_FAILURE() << what << ": code of row " << i / K << " col " << i % K << ": expected 0x" << std::hex
                      << int(want.q[i]) << " got 0x" << int(got.q[i]) << std::dec, ++bad;
    for (size_t i = 0; i < want.s.size() && bad < 10; ++i)
      if (std::memcmp(&got.s[i], &want.s[i], sizeof(float)) != 0)
        ADD_FAILURE() << what << ": scale of row " << i % T << " group " << i / T << ": expected " << want.s[i]
                      << " got " << got.s[i], ++bad;
  }
};

// Rows of n (registers: n <= 4096; the plain loop above), FP32 norm weights
// spanning 60 binades (and a zero group) or BF16 ones, rows with an all-zero
// group, an all-zero row and a group 1000x larger than the rest.
TEST_F(FusedQuant, NormCopyIsTheQuantizeKernelsBytes) {
  HostTensors h(71);
  for (int64_t n : {3072, 5120})
    for (DType wt : {DType::kF32, DType::kBF16})
      for (int64_t T : {17, 70})
        for (bool add : {false, true}) {
          const std::string what = fmt::format("{}rms_norm n {} T {} {} weights", add ? "add_" : "", n, T,
                                               dtype_name(wt));
          std::vector<float> w(n);
          for (int64_t j = 0; j < n; ++j) w[j] = 1.0f + 0.2f * h.normal();
          if (wt == DType::kF32) {
            for (int64_t j = 0; j < 128; ++j) w[2 * 128 + j] *= 1e4f, w[3 * 128 + j] *= 1e-6f;
            for (int64_t j = 0; j < 128; ++j) w[4 * 128 + j] *= 1e-30f, w[5 * 128 + j] = 0.0f;
          }
          const TensorView wv = h.store(w, wt, Shape{n});
          const void* d_w = wt == DType::kF32 ? static_cast<const void*>(gpu_array(w))
                                              : gpu_array(std::vector<uint16_t>(static_cast<const uint16_t*>(wv.data),
                                                                                static_cast<const uint16_t*>(wv.data) + n));
          auto x = h.randn(T * n, 2.0f), y = h.randn(T * n, 2.0f);
          // (x + y is exactly 0 where x = -y.)
          for (int64_t j = 0; j < 128; ++j) x[128 + j] = add ? -y[128 + j] : 0.0f;   // row 0, group 1: zero
          for (int64_t j = 0; j < 128; ++j) x[n + 7 * 128 + j] *= 1e3f;             // row 1, group 7: large
          for (int64_t j = 0; j < n; ++j) x[2 * n + j] = add ? -y[2 * n + j] : 0.0f;  // row 2: all zero
          Act x_fused = to_gpu(x, T), x_plain = to_gpu(x, T), gy = to_gpu(y, T);
          Act fused = poisoned(T, n), plain = poisoned(T, n);
          const cuda::Fp8Out copy = poisoned_copy(T, n);
          if (add) {
            ASSERT_EQ(cuda::launch_add_rms_norm(x_fused.data, gy.data, T, n, d_w, wt, 1e-6f, fused.data, copy, stream()),
                      cudaSuccess);
            ASSERT_EQ(cuda::launch_add_rms_norm(x_plain.data, gy.data, T, n, d_w, wt, 1e-6f, plain.data, {}, stream()),
                      cudaSuccess);
            EXPECT_TRUE(same_bits(to_host(x_fused), to_host(x_plain))) << what << ": residual";
          } else {
            ASSERT_EQ(cuda::launch_rms_norm(x_fused.data, T, n, d_w, wt, 1e-6f, fused.data, copy, stream()), cudaSuccess);
            ASSERT_EQ(cuda::launch_rms_norm(x_plain.data, T, n, d_w, wt, 1e-6f, plain.data, {}, stream()), cudaSuccess);
          }
          EXPECT_TRUE(same_bits(to_host(fused), to_host(plain))) << what << ": fp32 output";
          expect_same(read(copy, T, n), quantize(fused), T, n, what);
        }
}

// The prefill kernel's copy of its output (one head = one 128-channel group)
// over BF16 and FP8 caches, GQA group 6 (items of 128 vectors end mid-row),
// sequences of 17 to 300 rows at offsets in the step.
TEST_F(FusedQuant, AttentionCopyIsTheQuantizeKernelsBytes) {
  HostTensors h(72);
  const int kv_heads = 2, G = 6, heads = kv_heads * G, hd = 128, bs = 16;
  for (DType dt : {DType::kBF16, DType::kF8E4M3}) {
    const std::string what = fmt::format("prefill attention, {} cache", dtype_name(dt));
    const PagedKv kv = paged_kv(h, kv_heads, hd, bs, dt, {{40, 40}, {300, 17}, {329, 300}});
    std::vector<cuda::AttnSeq> seqs;
    std::vector<cuda::AttnItem> items;
    std::vector<int32_t> tables;
    for (size_t i = 0; i < kv.slices.size(); ++i) {
      const SeqSlice& sl = kv.slices[i];
      seqs.push_back({static_cast<int32_t>(sl.first_row), static_cast<int32_t>(sl.num_rows),
                      static_cast<int32_t>(sl.context_len), static_cast<int32_t>(tables.size())});
      tables.insert(tables.end(), sl.block_table.begin(), sl.block_table.end());
      for (int64_t v = 0; v < sl.num_rows * G; v += cuda::kPrefillVectors)
        items.push_back({static_cast<int32_t>(i), static_cast<int32_t>(v)});
    }
    const int64_t T = kv.rows, cols = int64_t{heads} * hd;
    Act q = to_gpu(h.randn(T * cols), T), fused = poisoned(T, cols), plain = poisoned(T, cols);
    cuda::AttentionArgs a;
    a.q = q.data, a.T = T;
    a.k_cache = kv.gpu.k_base(0), a.v_cache = kv.gpu.v_base(0), a.dtype = dt;
    a.k_scales = kv.gpu.k_scales(0), a.v_scales = kv.gpu.v_scales(0);
    a.block_size = bs, a.kv_heads = kv_heads, a.head_dim = hd, a.group = G, a.scale = 1.0f / std::sqrt(float(hd));
    a.seqs = gpu_array(seqs), a.items = gpu_array(items), a.num_items = static_cast<int64_t>(items.size());
    a.block_tables = gpu_array(tables);
    a.out = plain.data;
    ASSERT_EQ(cuda::launch_attention_prefill(a, stream()), cudaSuccess) << what;
    a.out = fused.data, a.out8 = poisoned_copy(T, cols);
    ASSERT_EQ(cuda::launch_attention_prefill(a, stream()), cudaSuccess) << what;
    EXPECT_TRUE(same_bits(to_host(fused), to_host(plain))) << what << ": fp32 output";
    expect_same(read(a.out8, T, cols), quantize(fused), T, cols, what);
  }
}

// A BF16 RMSNorm weight [H] around 1.
TensorView random_norm_weight(HostTensors& h, int64_t H) {
  std::vector<float> w(H);
  for (float& v : w) v = 1.0f + 0.2f * h.normal();
  return h.store(w, DType::kBF16, Shape{H});
}

// A layer's norm -> q|k|v and norm -> route -> MoE on two backends, fused
// and fused_quant=off: identical outputs; the fused one hands its
// copies to the 3 products and the MoE from 17 tokens, none at 16. With the
// default kernels (cuBLASLt, CUTLASS MoE on sm_90), then our own GEMM and
// MoE kernels.
TEST_F(FusedQuant, ProductsOnCopiesMatchUnfusedBitForBit) {
  cuda::CudaFeatures f;
  if (!fp8_paths_on(&f) || !f.fp8_moe) GTEST_SKIP() << kNoFp8;
  HostTensors h(73);
  const int64_t H = 1024, Q = 2048, KV = 256, I = 256;
  const int E = 8, k = 4;
  LayerWeights L;
  L.input_norm = random_norm_weight(h, H);
  L.post_attention_norm = random_norm_weight(h, H);
  L.q_proj = h.linear(DType::kF8E4M3, Q, H);
  L.k_proj = h.linear(DType::kF8E4M3, KV, H);
  L.v_proj = h.linear(DType::kF8E4M3, KV, H);
  L.router = h.store(h.randn(E * H, 1.0f / std::sqrt(float(H))), DType::kF32, Shape{E, H});
  L.router_bias = h.store(h.randn(E, 0.05f), DType::kF32, Shape{E});
  L.experts.resize(E);
  for (ExpertWeights& e : L.experts)
    e = {h.linear(DType::kF8E4M3, I, H), h.linear(DType::kF8E4M3, I, H), h.linear(DType::kF8E4M3, H, I)};
  for (const std::string kernels : {"", "fp8_gemm=own,moe_cutlass=off"}) {
    std::array<Side, 2> sides = fused_and_unfused(kernels);
    std::array<ModelWeights, 2> weights;
    ASSERT_NO_FATAL_FAILURE(prepare_layer(sides, weights, L));
    for (int64_t T : {16, 17, 100}) {
      const auto x = h.randn(T * H), y = h.randn(T * H);
      std::vector<std::vector<float>> got[2];
      int64_t uses[2];
      for (int i = 0; i < 2; ++i) {
        Side& s = sides[i];
        const LayerWeights& l = weights[i].layers[0];
        const int64_t before = s.uses();
        Act gx = s.act(x, T), gy = s.act(y, T), hh = s.nan_act(T, H), out = s.nan_act(T, H);
        Act q = s.nan_act(T, Q), kk = s.nan_act(T, KV), v = s.nan_act(T, KV);
        Act ids = s.nan_act(T, k), rw = s.nan_act(T, k);
        const ActCopy c1 = s.b->rms_norm(gx, l.input_norm, 1e-6f, hh);
        EXPECT_EQ(c1.empty(), i == 1 || T < cuda::kFp8GemmMinTokens);
        s.b->qkv_proj(hh, l.q_proj, l.k_proj, l.v_proj, q, kk, v, c1);
        const ActCopy c2 = s.b->add_rms_norm(gx, gy, l.post_attention_norm, 1e-6f, hh);
        const Routing routing{reinterpret_cast<int32_t*>(ids.data), rw.data, T, k};
        s.b->route(hh, l.router, l.router_bias, k, 1.0f, routing);
        s.b->moe(hh, l, routing, out, c2);
        got[i] = {s.host(q), s.host(kk), s.host(v), s.host(hh), s.host(out)};
        uses[i] = s.uses() - before;
      }
      const std::string what = fmt::format("at T {} ({} kernels)", T, kernels.empty() ? "default" : kernels);
      const char* names[] = {"q", "k", "v", "post-attention norm", "moe"};
      for (int j = 0; j < 5; ++j) EXPECT_TRUE(same_bits(got[0][j], got[1][j])) << names[j] << " " << what;
      EXPECT_EQ(uses[0], T >= cuda::kFp8GemmMinTokens ? 4 : 0) << "copies read (q, k, v, moe) " << what;
      EXPECT_EQ(uses[1], 0) << "fused_quant=off " << what;
    }
  }
}

// A product reads a copy only when it is handed the latest one, of its own
// input: not without it, not a copy a later producer retired, not for another
// view of the activation; a route in between changes nothing. Every case
// gives the unfused backend's bits.
TEST_F(FusedQuant, CopyIsUsedOnlyWhenHandedAndCurrent) {
  if (!fp8_paths_on()) GTEST_SKIP() << kNoFp8;
  HostTensors h(74);
  const int64_t H = 1024, N = 512, T = 40;
  const int E = 8, k = 2;
  LayerWeights L;
  L.input_norm = random_norm_weight(h, H);
  L.q_proj = h.linear(DType::kF8E4M3, N, H);
  L.router = h.store(h.randn(E * H, 1.0f / std::sqrt(float(H))), DType::kF32, Shape{E, H});
  std::array<Side, 2> sides = fused_and_unfused();
  std::array<ModelWeights, 2> weights;
  ASSERT_NO_FATAL_FAILURE(prepare_layer(sides, weights, L));
  const auto x = h.randn(T * H), z = h.randn(T * H);
  enum Case { kHanded, kNotHanded, kRouteBetween, kRetired, kOtherView };
  const char* names[] = {"handed", "not handed", "a route in between", "retired by a later norm",
                         "products of rows 0..19 and 20..39"};
  for (Case c : {kHanded, kNotHanded, kRouteBetween, kRetired, kOtherView}) {
    std::vector<float> got[2];
    int64_t uses[2];
    for (int i = 0; i < 2; ++i) {
      Side& s = sides[i];
      const LayerWeights& l = weights[i].layers[0];
      Act gx = s.act(x, T), hh = s.nan_act(T, H), y = s.nan_act(T, N), gz = s.act(z, T), h2 = s.nan_act(T, H);
      Act ids = s.nan_act(T, k), rw = s.nan_act(T, k);
      const int64_t before = s.uses();
      const ActCopy copy = s.b->rms_norm(gx, l.input_norm, 1e-6f, hh);
      if (c == kRouteBetween)
        s.b->route(hh, l.router, TensorView{}, k, 1.0f, Routing{reinterpret_cast<int32_t*>(ids.data), rw.data, T, k});
      if (c == kRetired) s.b->rms_norm(gz, l.input_norm, 1e-6f, h2);
      if (c == kOtherView) {
        s.b->matmul(hh.rows_slice(0, 20), l.q_proj, y.rows_slice(0, 20), copy);
        s.b->matmul(hh.rows_slice(20, 40), l.q_proj, y.rows_slice(20, 40), copy);
      } else {
        s.b->matmul(hh, l.q_proj, y, c == kNotHanded ? ActCopy{} : copy);
      }
      got[i] = s.host(y);
      uses[i] = s.uses() - before;
    }
    EXPECT_TRUE(same_bits(got[0], got[1])) << "product, " << names[c];
    EXPECT_EQ(uses[0], c == kHanded || c == kRouteBetween ? 1 : 0) << "copies read, " << names[c];
  }
}

// The whole model at dimensions in multiples of 128 (the committed tiny
// checkpoints' 192 take no FP8 GEMM): dummy FP8 weights, 2 layers, head_dim
// 128, GQA group 6, on a fused and an unfused backend. Prefill steps (one
// sequence; two; one prefill chunk beside a 5-row chunk, which takes the
// general attention kernel and so no attention copy), then decode steps of 18
// sequences (run padded to 24 rows: FP8 GEMM at 24 tokens; the third is
// replayed from a graph): identical logits, and the fused backend reads the
// copies it should.
TEST(FusedQuantModel, PrefillAndDecodeMatchUnfusedBitForBit) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device";
  if (!fp8_paths_on()) GTEST_SKIP() << kNoFp8;
  auto config = load_model_config(data_path("m2-tiny-fp8") + "/config.json");
  ASSERT_TRUE(config.ok()) << config.status().message();
  ModelConfig c = *config;
  ASSERT_TRUE(c.fp8.has_value());
  c.hidden_size = 256, c.intermediate_size = 128, c.head_dim = 128, c.rotary_dim = 64;
  c.num_attention_heads = 12, c.num_key_value_heads = 2, c.num_hidden_layers = 2;
  std::array<Side, 2> sides = fused_and_unfused();
  std::unique_ptr<ModelWeights> weights[2];
  std::unique_ptr<MiniMaxM2> models[2];
  std::unique_ptr<KvCache> caches[2];
  const int bs = 16, blocks_per_seq = 8, num_seqs = 24, num_blocks = blocks_per_seq * num_seqs;
  for (int i = 0; i < 2; ++i) {
    ASSERT_TRUE(sides[i].b);
    auto w = make_dummy_weights(c, 7);
    ASSERT_TRUE(w.ok()) << w.status().message();
    weights[i] = std::move(w.value());
    ASSERT_TRUE(sides[i].b->prepare_weights(*weights[i]).ok());
    models[i] = std::make_unique<MiniMaxM2>(*weights[i], *sides[i].b);
    caches[i] = models[i]->make_kv_cache(bs, num_blocks, DType::kBF16);
  }
  // Sequence s owns blocks [8 s, 8 s + 8) (128 tokens); length[s] tokens cached.
  std::vector<std::vector<int32_t>> tables(num_seqs);
  for (int s = 0; s < num_seqs; ++s)
    for (int b = 0; b < blocks_per_seq; ++b) tables[s].push_back(s * blocks_per_seq + b);
  std::vector<int64_t> length(tables.size(), 0);
  std::mt19937 rng(9);
  // A step of `rows[s]` new tokens for each sequence s listed, all logits.
  auto step = [&](const std::vector<std::pair<int, int64_t>>& rows) {
    StepInput in;
    for (auto [s, n] : rows) {
      in.seqs.push_back({static_cast<int64_t>(in.tokens.size()), n, length[s] + n, tables[s]});
      for (int64_t i = 0; i < n; ++i) {
        const int64_t pos = length[s] + i;
        in.logit_rows.push_back(static_cast<int64_t>(in.tokens.size()));
        in.tokens.push_back(static_cast<int32_t>(rng() % c.vocab_size));
        in.positions.push_back(static_cast<int32_t>(pos));
        in.slots.push_back(int64_t{tables[s][pos / bs]} * bs + pos % bs);
      }
      length[s] += n;
    }
    return in;
  };
  struct Case {
    const char* what;
    std::vector<std::pair<int, int64_t>> rows;
    int64_t uses_per_layer;  // q, k, v + o_proj (all rows prefill) + moe (> 64 pairs); -1: not checked
  };
  std::vector<Case> cases = {{"one sequence of 50 rows", {{0, 50}}, 5},
                             {"two sequences of 20 and 33 rows", {{0, 20}, {1, 33}}, 5},
                             {"a 5-row chunk beside a 40-row one", {{1, 5}, {2, 40}}, 4}};
  std::vector<std::pair<int, int64_t>> decode;
  for (int s = 3; s < 3 + 18; ++s) decode.emplace_back(s, 1);
  // Eager (q, k, v + moe: the 24 rows' 72 pairs take the grouped FP8 MoE),
  // recorded, replayed (no op runs on the host: nothing counted).
  ASSERT_EQ(sides[0].b->graph_rows(18), 24);
  for (int i = 0; i < 3; ++i) cases.push_back({"decode of 18 sequences", decode, i == 0 ? 4 : -1});
  for (const Case& cs : cases) {
    const StepInput in = step(cs.rows);
    std::vector<float> logits[2];
    int64_t uses[2];
    for (int i = 0; i < 2; ++i) {
      const int64_t before = sides[i].uses();
      ASSERT_TRUE(models[i]->forward(in, *caches[i], &logits[i]).ok()) << cs.what;
      uses[i] = sides[i].uses() - before;
    }
    EXPECT_TRUE(same_bits(logits[0], logits[1])) << cs.what;
    EXPECT_EQ(uses[1], 0) << cs.what << ": fused_quant=off";
    if (cs.uses_per_layer >= 0) {
      EXPECT_EQ(uses[0], cs.uses_per_layer * c.num_hidden_layers) << cs.what << ": copies read";
    }
    std::printf("  %s: %lld copies read\n", cs.what, static_cast<long long>(uses[0]));
  }
}

}  // namespace
}  // namespace m2::test
