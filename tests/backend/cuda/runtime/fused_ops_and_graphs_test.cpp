// The CUDA backend's fused decode steps against the CPU backend's unfused
// ops (the Backend defaults), and recorded decode graphs against op-by-op
// execution. Bounds as in tests/backend/ops_conformance_test.cpp: norms and RoPE ~1 ulp (fp64
// statistics on both sides), products 2e-5 (fp32 sums in another order),
// bf16 cache entries one bf16 ulp (2^-8 relative) since their fp32 inputs
// may differ by an ulp; FP8 cache bytes exactly, given the same rotated k.
#include <cstdlib>
#include <numeric>
#include <random>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/gemm/matmul.h"
#include "../cuda_test_util.h"
#include "model/minimax_m2.h"
#include "model/weights.h"
#include "tensor/dtype.h"

namespace m2::test {
namespace {

struct QkInputs;

class Fused : public CudaTest {
 protected:
  QkInputs qk_inputs(HostTensors& h, int heads, int kv_heads, int hd, int64_t T);
};

TEST_F(Fused, AddRmsNormMatchesAddThenRmsNorm) {
  HostTensors h(11);
  for (int64_t n : {3072, 192}) {
    for (int64_t T : {1, 5}) {
      ModelWeights w;
      auto wv = h.randn(n, 0.2f);
      for (float& v : wv) v += 1.0f;
      w.final_norm = h.store(wv, DType::kBF16, Shape{n});
      prepare(w);
      auto x = h.randn(T * n, 2.0f), y = h.randn(T * n, 2.0f);
      Act gx = to_gpu(x, T), gy = to_gpu(y, T), out = poisoned(T, n);
      gpu_->add_rms_norm(gx, gy, w.final_norm, 1e-6f, out);
      std::vector<float> want(T * n);
      cpu_->add(host_act(x, T), host_act(y, T));
      cpu_->rms_norm(host_act(x, T), w.final_norm, 1e-6f, host_act(want, T));
      EXPECT_EQ(to_host(gx), x) << "residual, n " << n << " T " << T;
      EXPECT_LE(rel_error(to_host(out), want), 1e-6) << "norm, n " << n << " T " << T;
    }
  }
}

// q|k|v stacked at upload and streamed in one pass (decode), or three
// products (more tokens): both match the CPU's three products.
TEST_F(Fused, QkvProjMatchesThreeProducts) {
  HostTensors h(12);
  struct Case { DType dt; int64_t q, kv, K; };
  for (const Case& c : {Case{DType::kF8E4M3, 6144, 1024, 3072}, Case{DType::kBF16, 512, 128, 192},
                        Case{DType::kF8E4M3, 256, 128, 192}}) {
    ModelWeights w;
    w.layers.resize(1);
    LayerWeights& L = w.layers[0];
    L.q_proj = h.linear(c.dt, c.q, c.K);
    L.k_proj = h.linear(c.dt, c.kv, c.K);
    L.v_proj = h.linear(c.dt, c.kv, c.K);
    prepare(w);
    for (int64_t T : {1, 3, 16, 17}) {
      auto x = h.randn(T * c.K);
      Act gx = to_gpu(x, T), gq = poisoned(T, c.q), gk = poisoned(T, c.kv), gv = poisoned(T, c.kv);
      gpu_->qkv_proj(gx, L.q_proj, L.k_proj, L.v_proj, gq, gk, gv);
      std::vector<float> q(T * c.q), k(T * c.kv), v(T * c.kv);
      cpu_->matmul(host_act(x, T), L.q_proj, host_act(q, T));
      cpu_->matmul(host_act(x, T), L.k_proj, host_act(k, T));
      cpu_->matmul(host_act(x, T), L.v_proj, host_act(v, T));
      const std::string what = std::string(dtype_name(c.dt)) + " q " + std::to_string(c.q) + " T " + std::to_string(T);
      if (T > cuda::kGemvMaxTokens) {
        // Many tokens: the three products of matmul (maybe FP8 tensor cores
        // with quantised activations, tested in cuda_fp8_gemm_test.cpp).
        Act q1 = poisoned(T, c.q), k1 = poisoned(T, c.kv), v1 = poisoned(T, c.kv);
        gpu_->matmul(gx, L.q_proj, q1);
        gpu_->matmul(gx, L.k_proj, k1);
        gpu_->matmul(gx, L.v_proj, v1);
        EXPECT_EQ(to_host(gq), to_host(q1)) << "q, " << what;
        EXPECT_EQ(to_host(gk), to_host(k1)) << "k, " << what;
        EXPECT_EQ(to_host(gv), to_host(v1)) << "v, " << what;
        continue;
      }
      EXPECT_LE(rel_error(to_host(gq), q), 2e-5) << "q, " << what;
      EXPECT_LE(rel_error(to_host(gk), k), 2e-5) << "k, " << what;
      EXPECT_LE(rel_error(to_host(gv), v), 2e-5) << "v, " << what;
      // The stacked copies also serve the single products.
      Act gk1 = poisoned(T, c.kv);
      gpu_->matmul(gx, L.k_proj, gk1);
      EXPECT_LE(rel_error(to_host(gk1), k), 2e-5) << "k_proj alone, " << what;
    }
  }
}

// One layer's BF16 q/k norm weights for `heads` / `kv_heads` heads of hd dims.
ModelWeights qk_norm_weights(HostTensors& h, int heads, int kv_heads, int hd) {
  ModelWeights w;
  w.layers.resize(1);
  w.layers[0].q_norm = h.store(h.randn(heads * hd, 0.2f), DType::kBF16, Shape{heads * hd});
  w.layers[0].k_norm = h.store(h.randn(kv_heads * hd, 0.2f), DType::kBF16, Shape{kv_heads * hd});
  return w;
}
// Positions of the fused QK tests' tokens: the first, small, a block edge,
// long context; then, for T >= 128 (the kernel's wide variant, 256 threads a
// token), more spread over 250K.
std::vector<int32_t> qk_positions(int64_t T) {
  std::vector<int32_t> pos = {0, 1, 17, 300, 4095, 200000};
  for (int64_t i = static_cast<int64_t>(pos.size()); i < T; ++i) pos.push_back(static_cast<int32_t>(i * 7919 % 250000));
  pos.resize(static_cast<size_t>(T));
  return pos;
}
// Distinct cache slots of T tokens in `slots_total` (a multiple of 4 > T):
// the 6 of the few-token case, else a stride coprime with it.
std::vector<int64_t> qk_slots(int64_t T, int64_t slots_total) {
  if (T == 6) return {13, 2, 7, 0, 15, 9};
  std::vector<int64_t> slots;
  for (int64_t i = 0; i < T; ++i) slots.push_back((i * 37 + 5) % slots_total);
  return slots;
}
constexpr int64_t kQkTokenCounts[] = {6, 160};

// The fused QK tests' inputs: one layer's q/k norm weights (prepared on the
// GPU) and random q, k, v of T tokens at qk_positions(T).
struct QkInputs {
  ModelWeights w;
  std::vector<int32_t> pos;
  int64_t kv_dim;
  std::vector<float> q, k, v;
};

QkInputs Fused::qk_inputs(HostTensors& h, int heads, int kv_heads, int hd, int64_t T) {
  QkInputs in{qk_norm_weights(h, heads, kv_heads, hd), qk_positions(T), static_cast<int64_t>(kv_heads) * hd, {}, {}, {}};
  prepare(in.w);
  in.q = h.randn(T * heads * hd, 2.0f), in.k = h.randn(T * in.kv_dim, 2.0f), in.v = h.randn(T * in.kv_dim);
  return in;
}

TEST_F(Fused, QkNormRopeStoreMatchesNormRopeThenStore) {
  HostTensors h(13);
  struct Case { int heads, kv_heads, hd, rot; DType cache; };
  for (const Case& c : {Case{48, 8, 128, 64, DType::kBF16}, Case{4, 2, 64, 32, DType::kF32},
                        Case{48, 8, 128, 64, DType::kF32}})
    for (const int64_t T : kQkTokenCounts) {
      auto [w, pos, kv_dim, q, k, v] = qk_inputs(h, c.heads, c.kv_heads, c.hd, T);
      KvCacheShape s;
      s.num_layers = 1, s.num_kv_heads = c.kv_heads, s.head_dim = c.hd, s.block_size = 4;
      s.num_blocks = T == 6 ? 4 : T / 2, s.dtype = c.cache;
      KvCache gcache(s, gpu_->allocate(KvCache::storage_bytes(s)));
      std::vector<uint8_t> cpu_bytes(KvCache::storage_bytes(s));  // zeros, like the GPU cache's unwritten slots
      gpu_->copy_from_host(cpu_bytes.data(), gcache.k_base(0), cpu_bytes.size());
      KvCache ccache(s, std::shared_ptr<void>(cpu_bytes.data(), [](void*) {}));
      const std::vector<int64_t> slots = qk_slots(T, s.num_blocks * s.block_size);
      const RopeParams rope{c.hd, c.rot, 5e6};
      Act gq = to_gpu(q, T), gk = to_gpu(k, T), gv = to_gpu(v, T);
      gpu_->qk_norm_rope_store(gq, gk, gv, w.layers[0].q_norm, w.layers[0].k_norm, 1e-6f, pos, rope, gcache, 0, slots);
      cpu_->qk_norm_rope(host_act(q, T), host_act(k, T), w.layers[0].q_norm, w.layers[0].k_norm, 1e-6f, pos, rope);
      cpu_->kv_store(ccache, 0, host_act(k, T), host_act(v, T), slots);
      const std::string what = std::string(dtype_name(c.cache)) + " head_dim " + std::to_string(c.hd) + " T " + std::to_string(T);
      EXPECT_LE(rel_error(to_host(gq), q), 1e-6) << "q, " << what;
      EXPECT_LE(rel_error(to_host(gk), k), 1e-6) << "k, " << what;
      // Cache rows, decoded to fp32.
      const size_t elems = static_cast<size_t>(s.num_blocks * s.block_size * kv_dim);
      std::vector<uint8_t> gbytes(KvCache::storage_bytes(s));
      gpu_->copy_to_host(gcache.k_base(0), gbytes.data(), gbytes.size());
      auto decode = [&](const uint8_t* p) {
        std::vector<float> out(elems);
        for (size_t i = 0; i < elems; ++i) {
          if (c.cache == DType::kF32) {
            std::memcpy(&out[i], p + 4 * i, 4);
          } else {
            out[i] = bf16_to_f32(static_cast<uint16_t>(p[2 * i] | p[2 * i + 1] << 8));
          }
        }
        return out;
      };
      const size_t layer_bytes = elems * dtype_size(c.cache);
      const double tol = c.cache == DType::kF32 ? 1e-6 : 8e-3;
      EXPECT_LE(rel_error(decode(gbytes.data()), decode(cpu_bytes.data())), tol) << "cached k, " << what;
      EXPECT_EQ(0, std::memcmp(gbytes.data() + layer_bytes, cpu_bytes.data() + layer_bytes, layer_bytes))
          << "cached v (a plain conversion), " << what;
    }
}

// The fused step into an FP8 cache quantises the rotated k and v itself:
// codes and per (token, kv head) scales byte for byte the CPU backend's
// kv_store of the same rotated k (the GPU's own, since the rotation may
// differ from the CPU's by an ulp) and v, and those of the unfused GPU path
// (qk_norm_rope, then kv_store's kv_store_fp8_kernel). Head rows (head_dim
// / 4 threads) that are one aligned warp (head_dim 128 after q_dim 6144),
// two to a warp (64), half a warp from lane 16 (64 after q_dim 192), and
// across two warps (96 after q_dim 576, from warp 4 lane 16); v heads of
// zeros (scale 1), tiny and huge magnitudes, and
// amax 448 (scale 1) with values exactly between two e4m3 codes (round to
// even) and signed zeros; a k head of zeros.
TEST_F(Fused, QkNormRopeStoreIntoFp8CacheIsBitIdenticalToCpu) {
  HostTensors h(14);
  struct Case { int heads, kv_heads, hd, rot; };
  for (const Case& c : {Case{48, 8, 128, 64}, Case{4, 2, 64, 32}, Case{3, 1, 64, 32}, Case{6, 2, 96, 64}})
    for (const int64_t T : kQkTokenCounts) {
      auto [w, pos, kv_dim, q, k, v] = qk_inputs(h, c.heads, c.kv_heads, c.hd, T);
      std::fill(k.begin() + (T - 1) * kv_dim, k.begin() + (T - 1) * kv_dim + c.hd, 0.0f);
      const float ties[] = {1.0625f, 1.1875f, 0.0009765625f, 0.0029296875f, 0.0087890625f, -1.0625f, -0.0009765625f, 272.0f};
      for (int64_t t = 0; t < T; ++t) {
        for (int hh = 0; hh < c.kv_heads; ++hh) {
          float* r = v.data() + t * kv_dim + static_cast<int64_t>(hh) * c.hd;
          switch ((t + hh) % 4) {
            case 0: std::fill(r, r + c.hd, 0.0f); break;
            case 1: for (int d = 0; d < c.hd; ++d) r[d] *= (d % 2 ? 1e-3f : 300.0f); break;
            case 2:
              for (int d = 0; d < c.hd; ++d) r[d] = ties[d % 8] * (d % 16 < 8 ? 1.0f : 0.5f);
              r[0] = -448.0f, r[1] = -0.0f;
              break;
            default: r[3] = -0.0f; break;
          }
        }
      }
      KvCacheShape s;
      s.num_layers = 1, s.num_kv_heads = c.kv_heads, s.head_dim = c.hd, s.block_size = 4, s.num_blocks = T == 6 ? 4 : T / 2;
      s.dtype = DType::kF8E4M3;
      const size_t bytes = KvCache::storage_bytes(s);
      const std::vector<uint8_t> zeros(bytes, 0);  // the unwritten slots stay zero in all three
      KvCache fused(s, gpu_->allocate(bytes)), unfused(s, gpu_->allocate(bytes));
      gpu_->copy_from_host(zeros.data(), fused.k_base(0), bytes);
      gpu_->copy_from_host(zeros.data(), unfused.k_base(0), bytes);
      std::vector<uint8_t> cpu_bytes = zeros;
      KvCache ccache(s, std::shared_ptr<void>(cpu_bytes.data(), [](void*) {}));
      const std::vector<int64_t> slots = qk_slots(T, s.num_blocks * s.block_size);
      const RopeParams rope{c.hd, c.rot, 5e6};
      const Weight &qn = w.layers[0].q_norm, &kn = w.layers[0].k_norm;
      Act gq = to_gpu(q, T), gk = to_gpu(k, T), gv = to_gpu(v, T);
      gpu_->qk_norm_rope_store(gq, gk, gv, qn, kn, 1e-6f, pos, rope, fused, 0, slots);
      Act uq = to_gpu(q, T), uk = to_gpu(k, T);
      gpu_->qk_norm_rope(uq, uk, qn, kn, 1e-6f, pos, rope);
      gpu_->kv_store(unfused, 0, uk, gv, slots);
      std::vector<float> rotated_k = to_host(gk);
      cpu_->kv_store(ccache, 0, host_act(rotated_k, T), host_act(v, T), slots);
      cpu_->qk_norm_rope(host_act(q, T), host_act(k, T), qn, kn, 1e-6f, pos, rope);
      const std::string what = "heads " + std::to_string(c.heads) + "/" + std::to_string(c.kv_heads) + " head_dim " +
                               std::to_string(c.hd) + " T " + std::to_string(T);
      EXPECT_LE(rel_error(to_host(gq), q), 1e-6) << "q, " << what;
      EXPECT_LE(rel_error(rotated_k, k), 1e-6) << "k, " << what;
      // Codes of K, then V, then the K and V scales (KvCache's layout).
      auto expect_bytes = [&](const KvCache& cache, const std::vector<uint8_t>& want, const char* against) {
        std::vector<uint8_t> got(bytes);
        gpu_->copy_to_host(cache.k_base(0), got.data(), bytes);
        size_t differing = 0, first = bytes;
        for (size_t i = 0; i < bytes; ++i) {
          if (got[i] == want[i]) continue;
          if (differing++ == 0) first = i;
        }
        EXPECT_EQ(differing, 0u) << "cache bytes differing from " << against << ", " << what << "; the first at byte "
                                 << first << " of " << bytes << " (codes: " << 2 * s.num_blocks * s.block_bytes()
                                 << " bytes, then scales)";
      };
      expect_bytes(fused, cpu_bytes, "the CPU's kv_store");
      std::vector<uint8_t> unfused_bytes(bytes);
      gpu_->copy_to_host(unfused.k_base(0), unfused_bytes.data(), bytes);
      expect_bytes(fused, unfused_bytes, "qk_norm_rope + kv_store on the GPU");
    }
}

// Decode steps of a batch of sequences replayed from recorded graphs give
// the logits of the same steps run op by op, through a change of batch size
// (scratch growth retires the graphs), contexts and batch sizes that run
// padded to a capture size (23 and 22 rows as 24, which on this model take
// the same kernels as unpadded: > 64 (token, expert) pairs; the padding rows
// write no KV, or the next steps would read it).
TEST(CudaGraphs, ReplayedDecodeMatchesEagerDecode) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device";
  auto w = load_model(data_path("m2-tiny-fp8"), LoadOptions{});
  ASSERT_TRUE(w.ok()) << w.status().message();
  // (sync, which gpu_check.sh sets for the op tests, would turn graphs off.)
  cuda::CudaOptions eager_options = test_options(), graph_options = test_options();
  eager_options.graphs = false;
  graph_options.sync_each_op = false;
  graph_options.graphs = true;
  auto eager = make_cuda_backend(0, eager_options);
  auto graphs = make_cuda_backend(0, graph_options);
  ASSERT_TRUE(eager && graphs);
  ASSERT_TRUE(eager->prepare_weights(**w).ok());
  auto w2 = load_model(data_path("m2-tiny-fp8"), LoadOptions{});
  ASSERT_TRUE(w2.ok());
  ASSERT_TRUE(graphs->prepare_weights(**w2).ok());
  MiniMaxM2 em(**w, *eager), gm(**w2, *graphs);
  ASSERT_EQ(graphs->graph_rows(23), 24);
  ASSERT_EQ(eager->graph_rows(23), 23);
  const int bs = 16, max_seqs = 23, steps = 300;
  const int64_t V = em.config().vocab_size;
  const int64_t per_seq = (steps + 8 + bs - 1) / bs;
  auto ecache = em.make_kv_cache(bs, per_seq * max_seqs, DType::kBF16);
  auto gcache = gm.make_kv_cache(bs, per_seq * max_seqs, DType::kBF16);
  std::vector<std::vector<int32_t>> tables(max_seqs);
  for (int s = 0; s < max_seqs; ++s)
    for (int64_t b = 0; b < per_seq; ++b) tables[s].push_back(static_cast<int32_t>(b * max_seqs + (max_seqs - 1 - s)));
  std::vector<int32_t> last(max_seqs);
  std::vector<int64_t> length(max_seqs, 0);  // tokens each sequence has cached
  std::iota(last.begin(), last.end(), 7);
  double worst = 0;
  int replays_checked = 0;
  for (int step = 0; step < steps; ++step) {
    // Batch size 1 for 40 steps, then 4 (growth), then 2 (sequences 2 and 3
    // pause), then 4 again, 23 and 22 (padded); each sequence continues from
    // its own length.
    const int n = step < 40 ? 1 : step < 150 ? 4 : step < 200 ? 2 : step < 220 ? 4 : step < 270 ? 23 : 22;
    StepInput in;
    for (int s = 0; s < n; ++s) {
      const int64_t pos = length[s]++;
      in.tokens.push_back(last[s]);
      in.positions.push_back(static_cast<int32_t>(pos));
      in.slots.push_back(static_cast<int64_t>(tables[s][pos / bs]) * bs + pos % bs);
      // The blocks the context needs, as the engine passes them: the tables
      // grow while a graph recorded at a shorter one is replayed (issue 29:
      // a replay read the decode sequences at the offset they had when the
      // tables were shorter).
      in.seqs.push_back({s, 1, pos + 1, std::span<const int32_t>(tables[s]).first(static_cast<size_t>(pos / bs + 1))});
      in.logit_rows.push_back(s);
    }
    std::vector<float> el, gl;
    ASSERT_TRUE(em.forward(in, *ecache, &el).ok()) << "step " << step;
    ASSERT_TRUE(gm.forward(in, *gcache, &gl).ok()) << "step " << step;
    const double d = max_abs_diff(el, gl);
    worst = std::max(worst, d);
    ASSERT_LE(d, 2e-4) << "step " << step << " batch " << n;
    for (int s = 0; s < n; ++s) {
      const float* e = el.data() + s * V;
      last[s] = static_cast<int32_t>(std::max_element(e, e + V) - e);
    }
    ++replays_checked;
  }
  std::printf("graphs vs eager: max |logit difference| %.3g over %d decode steps\n", worst, replays_checked);
}

// Start-up recording (MiniMaxM2::record_decode_graphs, what `serve` does)
// records every decode batch size up to the limit at short and long
// contexts, writes nothing to the KV cache, and leaves nothing to record when
// decode steps of every batch size and many contexts follow. On the aligned
// model (head_dim 128: the decode kernels, as M2's; the tiny checkpoints'
// 64-wide heads take the general kernel, whose graphs are per context bucket).
TEST(CudaGraphs, StartUpRecordingLeavesNoneToRecordWhileServing) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device";
  auto w = make_dummy_weights(aligned_fp8_config(2, 4096), 3);
  ASSERT_TRUE(w.ok()) << w.status().message();
  cuda::CudaOptions o = test_options();
  o.sync_each_op = false, o.graphs = true;
  auto gpu = make_cuda_backend(0, o);
  ASSERT_TRUE(gpu && gpu->prepare_weights(**w).ok());
  MiniMaxM2 m(**w, *gpu);
  const int bs = 16, max_seqs = 40;
  const int64_t max_context = 4096, per_seq = max_context / bs;
  StepLimits limits;
  limits.max_tokens = 256, limits.max_seqs = max_seqs, limits.max_logit_rows = 256, limits.max_context = max_context;
  limits.cache = m.kv_shape(bs, per_seq * max_seqs, DType::kBF16);
  ASSERT_TRUE(m.reserve(limits).ok());
  auto cache = m.make_kv_cache(bs, per_seq * max_seqs, DType::kBF16);
  // Known cache contents, to see that the recording steps write none.
  const size_t bytes = KvCache::storage_bytes(cache->shape());
  std::vector<uint8_t> before(bytes), after(bytes);
  for (size_t i = 0; i < bytes; ++i) before[i] = static_cast<uint8_t>(i * 131 % 251);
  gpu->copy_from_host(before.data(), cache->k_base(0), bytes);
  auto steps = m.record_decode_graphs(*cache);
  ASSERT_TRUE(steps.ok()) << steps.status().message();
  gpu->copy_to_host(cache->k_base(0), after.data(), bytes);
  EXPECT_TRUE(before == after) << "a recording step wrote to the KV cache";
  const int64_t recorded = cuda_graphs_recorded(*gpu);
  // 1-16, 24, 32, 40 rows, at one key and at 4,096 (the attention may take
  // the same kernel at both: at least one graph per size).
  EXPECT_EQ(*steps, 2 * 2 * 19);
  EXPECT_GE(recorded, 19);
  std::printf("start-up recording: %lld steps, %lld graphs\n", static_cast<long long>(*steps),
              static_cast<long long>(recorded));

  std::mt19937 rng(5);
  std::vector<int64_t> length(max_seqs, 0);
  for (int step = 0; step < 200; ++step) {
    const int n = 1 + static_cast<int>(rng() % max_seqs);
    StepInput in;
    for (int s = 0; s < n; ++s) {
      // Contexts from 1 to max_context - 1 across the steps (sequences start long).
      if (length[s] == 0) length[s] = static_cast<int64_t>(rng() % (max_context - 300));
      const int64_t pos = length[s]++;
      in.tokens.push_back(static_cast<int32_t>(rng() % m.config().vocab_size));
      in.positions.push_back(static_cast<int32_t>(pos));
      in.slots.push_back(int64_t{s} * per_seq * bs + pos);  // sequence s owns blocks [s per_seq, (s + 1) per_seq)
      in.seqs.push_back({s, 1, pos + 1, {}});
      in.logit_rows.push_back(s);
    }
    std::vector<std::vector<int32_t>> tables(static_cast<size_t>(n));
    for (int s = 0; s < n; ++s) {
      for (int64_t b = 0; b <= (length[s] - 1) / bs; ++b) tables[s].push_back(static_cast<int32_t>(s * per_seq + b));
      in.seqs[s].block_table = tables[s];
    }
    std::vector<float> logits;
    ASSERT_TRUE(m.forward(in, *cache, &logits).ok()) << "step " << step;
  }
  EXPECT_EQ(cuda_graphs_recorded(*gpu), recorded) << "a decode step recorded a graph after start-up";
}

}  // namespace
}  // namespace m2::test
