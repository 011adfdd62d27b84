// Every choice of the CUDA backend that is not a pure function of the model,
// the step's shape and the device (plain C++: the CLI and the plans read it
// without the CUDA headers). Parsed once, from `--cuda-options` and the
// environment variable M2CPP_CUDA_OPTIONS (the flag wins), logged when the
// backend starts, and passed to it: no op reads the environment.
//
// The keys a user may set select a real fallback (what another GPU or a
// build without a library runs) or a documented diagnosis:
//   fp8_gemm = cublaslt | own | off   dense FP8 products: cuBLASLt's block-scaled
//                                     matmul (our kernel where it has none), our
//                                     mma.sync kernel, or fp32 activations
//                                     everywhere (off: the W8A32 numerics of a
//                                     5-token step for every step)
//   moe_cutlass = on | off            the grouped FP8 MoE on CUTLASS, or our kernel
//   attn_prefill = flashinfer | mma   prefill attention on FlashInfer's Hopper
//                                     kernel, or our mma.sync kernel
//   tc_attention = on | off           tensor-core attention; off: the SIMT
//                                     kernels for every step (fp32 throughout)
//   graphs = on | off                 decode steps recorded as CUDA graphs
//   sync = on | off                   synchronise after every op (names the
//                                     failing op; turns graphs off)
//   profile = on | off                per-op GPU times printed at exit (turns graphs off)
//   pdl = on | off                    early kernel starts (programmatic dependent launch)
//   batch_invariant = on | off        one kernel per op whatever the step's size, attention
//                                     keys split at fixed positions: a sequence's logits
//                                     bit-identical alone, in any batch, at any chunking
//                                     (also the flag --batch-invariant; docs/design.md)
// The other fields select kernel variants for tests and benchmarks, which
// set them in code (CudaOptions is the API, not the environment).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

// (Declared only: device code includes this header, and nvcc cannot compile fmt.)
namespace m2 {
class Status;
template <class T>
class Result;
}  // namespace m2

namespace m2::cuda {

// Which kernel runs the dense FP8 GEMM of many tokens.
enum class Fp8GemmMode { kOwn, kCublasLt, kOff };
// The decode attention kernel for steps whose keys are split (kAuto: by the
// split length, attention_decode_on_mma).
enum class SplitDecode { kAuto, kSimt, kMma };

struct CudaOptions {
  // Set by users (the keys above).
  Fp8GemmMode fp8_gemm = Fp8GemmMode::kCublasLt;
  bool moe_cutlass = true;
  bool flashinfer_prefill = true;
  bool tc_attention = true;
  bool graphs = true;
  bool sync_each_op = false;
  bool profile = false;
  bool pdl = true;
  bool batch_invariant = false;
  // Variants for tests and benchmarks.
  bool fused_quant = true;       // producers write the FP8 copy their FP8 readers take (fp8_act_copy.h)
  bool route_gemm = true;        // the router's logits of many tokens as one fp32 GEMM (route_gemm.h)
  bool bf16_gemm = true;         // BF16 weights x many tokens on cuBLASLt (bf16_matmul.h)
  bool gemv_mma = true;          // FP8 decode GEMV on tensor cores (gemv_mma.cuh)
  bool moe_decode_wgmma = true;  // the decode MoE's down pass on wgmma (moe_decode_wgmma.cu)
  SplitDecode split_decode = SplitDecode::kAuto;

  // Routed experts in host memory (issue 22; moe/host_experts.h), set by the
  // placement flags (--cpu-moe, --n-cpu-moe), not by keys.
  static constexpr int kCpuMoeAuto = -1, kCpuMoeAll = -2;
  int cpu_moe_layers = 0;             // the experts of layers [0, N) on the host; kCpuMoeAuto (below), kCpuMoeAll
  double cpu_moe_memory_fraction = 0.9;  // auto: the fraction of the device's memory this process may use ...
  int64_t cpu_moe_reserve_bytes = 0;     // ... of which this much stays for the KV cache and activations
  int cpu_moe_max_tokens = 48;        // steps of up to this many tokens run host experts on the CPU; larger
                                      // ones stream them to the GPU (--cpu-moe-max-tokens; measured, perf.md)
  int cpu_moe_threads = 0;            // the CPU's expert threads (0: every hardware thread)

  // `spec`: "key=value[,key=value...]" of the user keys; an error names the
  // key or value it cannot take (and `origin`, e.g. "--cuda-options").
  Status apply(std::string_view spec, std::string_view origin);
  // The defaults, then M2CPP_CUDA_OPTIONS, then `flag` (empty: none).
  static Result<CudaOptions> parse(std::string_view flag);
  // Every field, "key=value" comma-separated (the start-up log line).
  std::string describe() const;
};

const char* fp8_gemm_mode_name(Fp8GemmMode mode);

}  // namespace m2::cuda
