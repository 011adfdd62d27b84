// The CUDA backend's own checks beside the op conformance suite
// (tests/backend/ops_conformance_test.cpp): the dummy FP8 weights it
// generates on the GPU, a weight update written over the prepared copies in
// place, and a missing device refused.
#include <cstring>

#include "backend/cuda/runtime/device_types.h"
#include "backend/cuda/runtime/dummy_fill.h"
#include "../cuda_test_util.h"
#include "backend/cuda/runtime/device_buffer.h"
#include "model/dummy_values.h"
#include "model/minimax_m2.h"
#include "model/weight_update.h"

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

// A weight update (the rollout routes): the new set's changed tensors go over
// the served copies in place - the forward pass then equals the CPU's on the
// new weights, and no device memory is allocated (recorded graphs stay valid).
TEST(CudaBackend, WeightUpdateWritesTheServedCopiesInPlace) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device";
  auto c = load_config_from(data_path("m2-tiny-fp8"));
  ASSERT_TRUE(c.ok()) << c.status().message();
  auto served = make_dummy_weights(*c, 5);
  auto next = make_dummy_weights(*c, 6);
  auto host = make_dummy_weights(*c, 6);
  ASSERT_TRUE(served.ok() && next.ok() && host.ok());
  // One tensor kept: the update leaves what it does not replace.
  (*next)->layers[0].router = (*served)->layers[0].router;
  (*host)->layers[0].router = (*served)->layers[0].router;
  auto gpu = make_cuda_backend(0);
  auto cpu = make_cpu_backend();
  ASSERT_TRUE(gpu && gpu->prepare_weights(**served).ok());
  MiniMaxM2 gm(**served, *gpu), cm(**host, *cpu);
  auto gcache = gm.make_kv_cache(16, 8, DType::kBF16);
  auto ccache = cm.make_kv_cache(16, 8, DType::kBF16);
  StepInput in;
  for (int i = 0; i < 20; ++i) {
    in.tokens.push_back((i * 7919) % c->vocab_size), in.positions.push_back(i), in.slots.push_back(i);
  }
  const std::vector<int32_t> table = {0, 1};
  in.seqs.push_back({0, 20, 20, table});
  in.logit_rows = {19};
  std::vector<float> before, after, want;
  ASSERT_TRUE(gm.forward(in, *gcache, &before).ok());  // sizes the scratch
  const uint64_t generation = cuda::memory_generation();
  const size_t free_before = gpu->memory_info().free_bytes;
  ASSERT_TRUE(gpu->update_weights(**served, **next).ok());
  EXPECT_EQ(cuda::memory_generation(), generation);
  EXPECT_EQ(gpu->memory_info().free_bytes, free_before);
  EXPECT_EQ((*next)->layers[0].q_proj.prepared, (*served)->layers[0].q_proj.prepared);
  gm.set_weights(**next);
  ASSERT_TRUE(gm.forward(in, *gcache, &after).ok());
  ASSERT_TRUE(cm.forward(in, *ccache, &want).ok());
  EXPECT_LT(rel_error(after, want), 2e-3);
  EXPECT_GT(rel_error(before, want), 0.1) << "the update changed nothing";
  // A refused update (another shape) copies nothing.
  auto wrong = make_dummy_weights(*c, 7);
  ASSERT_TRUE(wrong.ok());
  (*wrong)->final_norm.shape = Shape{(*wrong)->final_norm.shape[0] - 1};
  EXPECT_FALSE(gpu->update_weights(**next, **wrong).ok());
  std::vector<float> again;
  ASSERT_TRUE(gm.forward(in, *gcache, &again).ok());
  EXPECT_EQ(again, after);
}

// Weight sets as the server builds them: after each swap the replaced
// tensors' host bytes are released (release_replaced_bytes: their views then
// point at reserved address space), and the next update, built from that
// set, still writes exactly what it changes: the GPU forward equals the CPU's
// on the same values after each of two updates that overlap.
TEST(CudaBackend, UpdatesReleasedOnTheHostStillTellWhatChanges) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device";
  auto c = load_config_from(data_path("m2-tiny-fp8"));
  ASSERT_TRUE(c.ok()) << c.status().message();
  auto g0 = make_dummy_weights(*c, 5), c0 = make_dummy_weights(*c, 5);
  auto v6 = make_dummy_weights(*c, 6), v7 = make_dummy_weights(*c, 7);
  ASSERT_TRUE(g0.ok() && c0.ok() && v6.ok() && v7.ok());
  std::shared_ptr<WeightSet> gset = wrap_loaded_weights(std::move(*g0)), cset = wrap_loaded_weights(std::move(*c0));
  auto gpu = make_cuda_backend(0);
  auto cpu = make_cpu_backend();
  ASSERT_TRUE(gpu && gpu->prepare_weights(gset->weights()).ok());
  MiniMaxM2 gm(gset->weights(), *gpu), cm(cset->weights(), *cpu);
  auto gcache = gm.make_kv_cache(16, 8, DType::kBF16);
  auto ccache = cm.make_kv_cache(16, 8, DType::kBF16);
  StepInput in;
  for (int i = 0; i < 20; ++i) in.tokens.push_back((i * 7919) % c->vocab_size), in.positions.push_back(i), in.slots.push_back(i);
  const std::vector<int32_t> table = {0, 1};
  in.seqs.push_back({0, 20, 20, table});
  in.logit_rows = {19};
  // Named tensors of `from`, their bytes copied.
  auto take = [](const ModelWeights& from, std::initializer_list<const char*> names) {
    const auto views = weight_views(from);
    std::vector<UpdateTensor> out;
    for (const char* n : names) {
      const TensorView& v = views.at(n);
      std::shared_ptr<uint8_t[]> bytes(new uint8_t[v.nbytes()]);
      std::memcpy(bytes.get(), v.data, v.nbytes());
      out.push_back({n, v.dtype, v.shape, std::move(bytes), "test"});
    }
    return out;
  };
  const std::string q = "model.layers.0.self_attn.q_proj.", w2 = "model.layers.1.block_sparse_moe.experts.3.w2.";
  const std::vector<std::pair<const ModelWeights*, std::vector<std::string>>> updates = {
      {v6->get(), {"model.norm.weight", q + "weight", q + "weight_scale_inv", w2 + "weight", w2 + "weight_scale_inv"}},
      {v7->get(), {q + "weight", q + "weight_scale_inv", "model.layers.0.block_sparse_moe.gate.weight"}}};
  std::vector<float> got, want;
  ASSERT_TRUE(gm.forward(in, *gcache, &got).ok());
  for (const auto& [from, names] : updates) {
    std::vector<UpdateTensor> gu, cu;
    for (const std::string& n : names) {
      auto a = take(*from, {n.c_str()}), b = take(*from, {n.c_str()});
      gu.push_back(std::move(a[0])), cu.push_back(std::move(b[0]));
    }
    auto gnext = build_updated_weights(*gset, std::move(gu));
    auto cnext = build_updated_weights(*cset, std::move(cu));
    ASSERT_TRUE(gnext.ok() && cnext.ok());
    ASSERT_TRUE(gpu->update_weights(gset->weights(), (*gnext)->weights()).ok());
    gm.set_weights((*gnext)->weights());
    ASSERT_TRUE(release_replaced_bytes(**gnext).ok());
    EXPECT_TRUE((*gnext)->replaced.empty());
    EXPECT_FALSE((*gnext)->stand_ins.empty());
    gset = *gnext, cset = *cnext;  // (the old sets' bytes go)
    cm.set_weights(cset->weights());
    ASSERT_TRUE(gm.forward(in, *gcache, &got).ok());
    ASSERT_TRUE(cm.forward(in, *ccache, &want).ok());
    EXPECT_LT(rel_error(got, want), 2e-3) << names.size() << " tensors updated";
  }
}

TEST(CudaBackend, RefusesAMissingDevice) {
  EXPECT_EQ(make_cuda_backend(cuda_device_count() + 3), nullptr);
}

}  // namespace
}  // namespace m2::test
