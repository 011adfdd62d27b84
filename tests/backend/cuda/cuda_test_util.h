// Helpers of the CUDA backend's own tests: backend_test_util.h's fixture
// with the GPU as the backend under test (gpu_), its stream and SM count,
// and the CudaOptions a test runs with.
#pragma once

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <string>
#include <string_view>

#include "../backend_test_util.h"
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/runtime/cuda_options.h"
#include "model/weights.h"
#include "util/status.h"

namespace m2::test {

// The options the GPU tests run with: M2CPP_CUDA_OPTIONS (gpu_check.sh sets
// sync=on for the op tests, which names a failing op), then `variant`, a
// key=value list of CudaOptions' user keys and of its test variants
// (fused_quant, route_gemm, bf16_gemm, gemv_mma, moe_decode_wgmma = on|off;
// split_decode = auto|simt|mma). A bad variant fails the test.
inline cuda::CudaOptions test_options(std::string_view variant = "") {
  auto parsed = cuda::CudaOptions::parse("");
  EXPECT_TRUE(parsed.ok()) << parsed.status().message();
  cuda::CudaOptions o = parsed.ok() ? *parsed : cuda::CudaOptions{};
  std::string user;
  for (size_t b = 0; b < variant.size();) {
    const size_t e = std::min(variant.find(',', b), variant.size()), eq = variant.find('=', b);
    const std::string key(variant.substr(b, eq - b)), value(variant.substr(eq + 1, e - eq - 1));
    b = e + 1;
    bool* flag = key == "fused_quant" ? &o.fused_quant : key == "route_gemm" ? &o.route_gemm
                 : key == "bf16_gemm" ? &o.bf16_gemm : key == "gemv_mma" ? &o.gemv_mma
                 : key == "moe_decode_wgmma" ? &o.moe_decode_wgmma : nullptr;
    if (flag) {
      *flag = value == "on";
    } else if (key == "split_decode") {
      o.split_decode = value == "simt" ? cuda::SplitDecode::kSimt
                       : value == "mma" ? cuda::SplitDecode::kMma : cuda::SplitDecode::kAuto;
    } else {
      user += (user.empty() ? "" : ",") + key + "=" + value;
    }
  }
  const Status s = o.apply(user, "test variant");
  EXPECT_TRUE(s.ok()) << s.message();
  return o;
}

// A small model whose every matrix is a multiple of 128, so that the FP8
// tensor-core GEMMs, the CUTLASS MoE, FlashInfer's prefill attention and the
// tensor-core decode attention all run (m2-tiny-fp8's config, widened; GQA
// group 6 as M2.7's 48 / 8).
inline ModelConfig aligned_fp8_config(int layers, int max_positions) {
  auto c = load_config_from(data_path("m2-tiny-fp8"));
  EXPECT_TRUE(c.ok()) << c.status().message();
  ModelConfig cfg = *c;
  cfg.hidden_size = 256;
  cfg.intermediate_size = 256;
  cfg.head_dim = 128;
  cfg.rotary_dim = 64;
  cfg.num_attention_heads = 12;
  cfg.num_key_value_heads = 2;
  cfg.num_local_experts = 16;
  cfg.num_experts_per_tok = 4;
  cfg.num_hidden_layers = layers;
  cfg.max_position_embeddings = max_positions;
  return cfg;
}

// A GPU and a CPU backend; skips the test without a CUDA device.
class CudaTest : public ::testing::Test, public DeviceVsCpu {
 protected:
  void SetUp() override {
    if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device";
    gpu_ = make_cuda_backend(0, test_options());
    ASSERT_TRUE(gpu_) << "the CUDA backend did not start";
    cpu_ = make_cpu_backend();
  }
  Act to_gpu(const std::vector<float>& v, int64_t rows) { return to_dev(v, rows); }
  template <class T>
  T* gpu_array(const std::vector<T>& v) {
    return dev_array(v);
  }
  cudaStream_t stream() { return static_cast<cudaStream_t>(cuda_stream(*gpu_)); }
  static int num_sms() {
    int n = 0;
    EXPECT_EQ(cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, 0), cudaSuccess);
    return n;
  }

  std::unique_ptr<Backend>& gpu_ = dev_;
};

}  // namespace m2::test
