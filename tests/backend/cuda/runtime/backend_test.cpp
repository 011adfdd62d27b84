// The CUDA backend's own checks beside the op conformance suite
// (tests/backend/ops_conformance_test.cpp): the dummy FP8 weights it
// generates on the GPU, and a missing device refused.
#include "backend/cuda/runtime/device_types.h"
#include "backend/cuda/runtime/dummy_fill.h"
#include "../cuda_test_util.h"
#include "model/dummy_values.h"

namespace m2::test {
namespace {

class Ops : public CudaTest {};

TEST_F(Ops, DummyFp8WeightsGeneratedOnTheGpuAreTheHostFill) {
  const DummyFp8Table table = dummy_fp8_table();
  const uint64_t seed = 0x1234567887654321ull;
  for (int64_t first : {int64_t{0}, int64_t{3}, int64_t{1048573}}) {
    const int64_t n = 2500001;
    uint8_t* d = scratch<uint8_t>(n);
    ASSERT_EQ(cuda::launch_fill_dummy_fp8(d, first, n, seed, table, stream()), cudaSuccess);
    const std::vector<uint8_t> got = to_host(d, n);
    int64_t wrong = 0;
    for (int64_t i = 0; i < n; ++i) wrong += got[i] != table.code[dummy_fp8_index(seed, first + i)];
    EXPECT_EQ(wrong, 0) << "first " << first;
  }
  auto c = load_model_config(data_path("../../configs/minimax-m2.7.json"));  // the checkout, wherever it is
  ASSERT_TRUE(c.ok());
  c->num_hidden_layers = 1;
  c->num_local_experts = 4;
  c->vocab_size = 4096;
  auto host = make_dummy_weights(*c, 5);
  auto dev = make_dummy_weights(*c, 5, /*fp8_on_device=*/true);
  ASSERT_TRUE(host.ok() && dev.ok());
  prepare(**host);
  prepare(**dev);
  const LayerWeights& H = (*host)->layers[0];
  const LayerWeights& D = (*dev)->layers[0];
  const std::pair<const Linear*, const Linear*> pairs[] = {
      {&H.q_proj, &D.q_proj}, {&H.v_proj, &D.v_proj}, {&H.o_proj, &D.o_proj}, {&H.experts[1].w3, &D.experts[1].w3},
      {&H.experts[3].w2, &D.experts[3].w2}};
  for (auto [h, d] : pairs) {
    const size_t bytes = h->weight.nbytes();
    const auto* record = static_cast<const cuda::PreparedTensor*>(d->prepared);
    ASSERT_NE(record, nullptr);
    const std::vector<uint8_t> got = to_host(record->weight.data, bytes);
    EXPECT_EQ(0, std::memcmp(got.data(), h->weight.data, bytes)) << h->weight.shape.str();
  }
}

TEST(CudaBackend, RefusesAMissingDevice) {
  EXPECT_EQ(make_cuda_backend(cuda_device_count() + 3), nullptr);
}

}  // namespace
}  // namespace m2::test
