// The CPU backend (fp32 activations: W8A32) on the aligned FP8 fixture
// (tests/data/m2-aligned-fp8, every matrix a multiple of 128) against the
// float64 reference of tools/w8a8_reference.py without activation
// quantisation (that tool equals transformers' float64 model on the tiny
// fixtures: tests/tools/test_w8a8_reference.py).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "model/greedy.h"
#include "model/minimax_m2.h"
#include "model/weights.h"
#include "test_paths.h"

namespace m2::test {
namespace {

double max_abs_diff(const std::vector<float>& a, const std::vector<double>& b) {
  double m = a.size() == b.size() ? 0 : INFINITY;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) m = std::max(m, std::abs(a[i] - b[i]));
  return m;
}

TEST(AlignedFp8, CpuMatchesFloat64W8A32Reference) {
  auto w = load_model(data_path("m2-aligned-fp8"), LoadOptions{});
  ASSERT_TRUE(w.ok()) << w.status().message();
  auto cpu = make_cpu_backend();
  ASSERT_TRUE(cpu->prepare_weights(**w).ok());
  MiniMaxM2 model(**w, *cpu);
  auto j = read_json_file(data_path("reference/m2-aligned-fp8/prompt.json"));
  ASSERT_TRUE(j.ok());
  const auto ids = (*j)["prompt_ids"].get<std::vector<int32_t>>();
  auto full = read_npy(data_path("reference/m2-aligned-fp8/w8a32.npy"));
  auto shrt = read_npy(data_path("reference/m2-aligned-fp8/short.npy"));
  ASSERT_TRUE(full.ok() && shrt.ok());
  auto got = all_logits(model, ids, DType::kF32);
  ASSERT_TRUE(got.ok()) << got.status().message();
  EXPECT_LE(max_abs_diff(*got, full->values), 1e-4);
  auto got5 = all_logits(model, std::span(ids).first(5), DType::kF32);
  ASSERT_TRUE(got5.ok());
  EXPECT_LE(max_abs_diff(*got5, shrt->values), 1e-4);
}

}  // namespace
}  // namespace m2::test
