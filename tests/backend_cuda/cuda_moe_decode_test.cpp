// The decode MoE's kernels (moe_decode.cu) through the backend's moe op,
// against the CPU backend: M2's expert shapes at the decode batches 1 and 4
// (8 and 32 (token, expert) pairs), FP8 and BF16, and shapes that reach the
// kernels' edges (fewer 16-byte chunks per row than lanes, rows of more
// chunks than a stage holds and not a multiple of it, more than 8 experts a
// token, up to 63 pairs). Bound as MoeMatchesCpu (cuda_ops_test.cpp): fp32
// sums in another order, 2e-5 relative.
#include <fmt/format.h>

#include <numeric>

#include "backend/cuda/kernels.h"
#include "cuda_test_util.h"

namespace m2::test {
namespace {

class DecodeMoe : public CudaTest {};

struct DecodeCase {
  DType dtype;
  int64_t H, I;
  int E, k;
  std::vector<int64_t> tokens;  // each at most kMoeDecodePairs / k
};

TEST_F(DecodeMoe, MatchesCpuAtM2ShapesAndTheKernelsEdges) {
  HostTensors h(61);
  const std::vector<DecodeCase> cases = {
      {DType::kF8E4M3, 3072, 1536, 16, 8, {1, 4}},  // M2
      {DType::kBF16, 3072, 1536, 12, 8, {1, 4}},
      {DType::kF8E4M3, 192, 96, 8, 3, {1, 5, 21}},  // rows of 12 and 6 chunks
      {DType::kF8E4M3, 7168, 128, 8, 4, {1, 3}},    // W1|W3 rows of 448 chunks: 14 a lane
      {DType::kF8E4M3, 256, 384, 20, 10, {1, 6}},   // 2 batches of slots in W2
      {DType::kBF16, 256, 64, 20, 10, {2}},
  };
  for (const DecodeCase& c : cases) {
    ModelWeights w;
    w.layers.resize(1);
    LayerWeights& L = w.layers[0];
    L.experts.resize(c.E);
    for (auto& e : L.experts) {
      e.w1 = h.linear(c.dtype, c.I, c.H);
      e.w3 = h.linear(c.dtype, c.I, c.H);
      e.w2 = h.linear(c.dtype, c.H, c.I);
    }
    prepare(w);
    for (int64_t T : c.tokens) {
      ASSERT_LE(T * c.k, cuda::kMoeDecodePairs);
      const std::string what = fmt::format("{} H {} I {} E {} top {} T {}", dtype_name(c.dtype), c.H, c.I, c.E, c.k, T);
      std::vector<int32_t> ids(T * c.k);
      std::vector<float> rw(T * c.k);
      std::vector<int32_t> perm(c.E);
      std::iota(perm.begin(), perm.end(), 0);
      for (int64_t t = 0; t < T; ++t) {
        std::shuffle(perm.begin(), perm.end(), h.rng());  // k distinct experts a token
        float sum = 0;
        for (int j = 0; j < c.k; ++j) ids[t * c.k + j] = perm[j], sum += rw[t * c.k + j] = 0.1f + std::abs(h.normal());
        for (int j = 0; j < c.k; ++j) rw[t * c.k + j] /= sum;
      }
      auto x = h.randn(T * c.H);
      std::vector<float> want(T * c.H);
      cpu_->moe(host_act(x, T), L, Routing{ids.data(), rw.data(), T, c.k}, host_act(want, T));
      Act out = poisoned(T, c.H);
      gpu_->moe(to_gpu(x, T), L, Routing{gpu_array(ids), gpu_array(rw), T, c.k}, out);
      EXPECT_LE(rel_error(to_host(out), want), 2e-5) << what;
    }
  }
}

}  // namespace
}  // namespace m2::test
