#include "backend/cuda/runtime/step_plan.h"

#include <fmt/format.h>

#include <algorithm>
#include <vector>

#include "backend/cuda/attention/attention_plan.h"
#include "backend/cuda/gemm/fp8_gemm.h"
#include "backend/cuda/gemm/matmul_plan.h"
#include "backend/cuda/moe/moe_plan.h"
#include "backend/cuda/runtime/device_caps.h"

namespace m2::cuda {

std::string describe_step_plan(const ModelConfig& c, const StepShape& s, const CudaOptions& o,
                               const DeviceCaps& caps) {
  const int64_t T = s.sequences * s.rows, H = c.hidden_size;
  const DType lin = c.fp8 ? DType::kF8E4M3 : c.dtype;
  std::string out = fmt::format("step: {} sequence{} x {} row{} = {} tokens, {} tokens of context, {} KV cache{}\n",
                                s.sequences, s.sequences == 1 ? "" : "s", s.rows, s.rows == 1 ? "" : "s", T,
                                s.context, dtype_name(s.kv_dtype), o.batch_invariant ? ", batch-invariant" : "");
  auto line = [&](const std::string& op, const std::string& kernel) { out += fmt::format("  {:<44} {}\n", op, kernel); };
  auto mm = [&](int64_t N, int64_t K, DType dt) { return plan_matmul({T, N, K, dt}, o, caps); };
  // A producer writes the FP8 copy of its [T, K] output when FP8 products
  // may read it (CudaBackend::fp8_copy_for).
  const bool copies = o.fused_quant && fp8_gemm_mode_for(o.fp8_gemm, caps.features) != Fp8GemmMode::kOff && c.fp8 &&
                      T >= fp8_gemm_min_tokens(o);
  auto copy_note = [&](int64_t K, bool read) {
    if (!copies || K % kFp8Block != 0) return std::string();
    return read ? std::string(" + its FP8 copy (read below)") : std::string(" + its FP8 copy (unread)");
  };

  line("embed", "embed (gather rows)");
  const MatmulPlan q = mm(c.q_dim(), H, lin), kv = mm(c.kv_dim(), H, lin), stacked = mm(c.q_dim() + 2 * c.kv_dim(), H, lin);
  const bool one_pass = stacked.kernel == MatmulKernel::kGemv || stacked.kernel == MatmulKernel::kGemvMma;
  const MoePlan moe = plan_moe({T, c.num_experts_per_tok, H, c.intermediate_size, c.num_local_experts, lin}, o, caps);
  line("input_layernorm (add_rms_norm)", "add_rms_norm" + copy_note(H, q.fp8_activations || moe.fp8_activations));
  if (one_pass) {
    line(fmt::format("qkv_proj [{}+{}+{}, {}] {}", c.q_dim(), c.kv_dim(), c.kv_dim(), H, dtype_name(lin)),
         "stacked, one pass: " + stacked.describe());
  } else {
    line(fmt::format("q_proj [{}, {}] {}", c.q_dim(), H, dtype_name(lin)),
         q.describe() + (q.fp8_activations && copies ? ", x from the norm's FP8 copy" : ""));
    line(fmt::format("k_proj, v_proj [{}, {}] {}", c.kv_dim(), H, dtype_name(lin)),
         kv.describe() + (kv.fp8_activations && copies ? ", x from the norm's FP8 copy" : ""));
  }
  line("qk_norm_rope_store", "qk_norm_rope (full-width RMSNorm, partial RoPE, KV store in one kernel)");
  std::vector<int64_t> rows(static_cast<size_t>(s.sequences), s.rows), ctx(static_cast<size_t>(s.sequences), s.context);
  line("attention", describe_attention_plan({rows, ctx, s.kv_dtype, c.head_dim, c.num_attention_heads,
                                             c.num_key_value_heads},
                                            o, caps));
  const MatmulPlan op = mm(H, c.q_dim(), lin);
  // The prefill kernel writes every row: and o's FP8 copy (batch invariance: every row there, for a BF16/FP8 cache of head_dim 128).
  const bool prefill_only = attention_prefill_on(o, s.kv_dtype, c.head_dim) && (o.batch_invariant || s.rows >= 16);
  line(fmt::format("o_proj [{}, {}] {}", H, c.q_dim(), dtype_name(lin)),
       op.describe() + (op.fp8_activations && copies && prefill_only ? ", x from attention's FP8 copy" : ""));
  line("post_attention_layernorm (add_rms_norm)", "add_rms_norm" + copy_note(H, moe.fp8_activations));
  line(fmt::format("route [{}, {}] F32, top {}", c.num_local_experts, H, c.num_experts_per_tok),
       route_kernel_name(plan_route(T, c.num_local_experts, H, DType::kF32, o)));
  line(fmt::format("moe {} x [{}, {}] {}, {} pairs", c.num_local_experts, c.intermediate_size, H, dtype_name(lin),
                   T * c.num_experts_per_tok),
       moe.describe() + (moe.fp8_activations && copies ? ", x from the norm's FP8 copy" : ""));
  out += fmt::format("  (x {} layers)\n", c.num_hidden_layers);
  const int64_t R = s.sequences;  // one logit row per sequence
  line("gather_rows, final norm", fmt::format("gather {} rows, rms_norm", R));
  line(fmt::format("lm_head [{}, {}] {}", c.vocab_size, H, dtype_name(c.dtype)),
       plan_matmul({R, c.vocab_size, H, c.dtype}, o, caps).describe());
  line("sample", caps.features.gpu_sampling ? "GPU sampling (thread block clusters)" : "on the host");
  // The scratch this step takes, by buffer (each grows to the largest step
  // it has served): what sizing them up front for it would reserve.
  const MatmulPlan lm = plan_matmul({R, c.vocab_size, H, c.dtype}, o, caps);
  size_t quantize = 0, split_scales = 0;
  for (const MatmulPlan* p : {&q, &kv, &op, &lm}) {
    if (!p->fp8_activations) continue;
    const bool from_copy = copies && (p != &op || prefill_only);
    if (!from_copy) quantize = std::max(quantize, p->quantize_bytes);
    split_scales = std::max(split_scales, p->scratch_bytes);
  }
  const int64_t widest = std::max<int64_t>(H, c.q_dim());  // one copy at a time: codes + a scale per 128
  const size_t copy = copies ? static_cast<size_t>(T * widest + T * widest / 128 * 4) : 0;
  const size_t bf16 = lm.kernel == MatmulKernel::kBf16CublasLt ? lm.scratch_bytes : 0;
  auto mib = [](size_t b) { return fmt::format("{:.1f}", b / 1048576.0); };
  out += fmt::format("  scratch (MiB): MoE {}, FP8 copies {}, FP8 quantisation {}, cuBLASLt split scales {}, "
                     "bf16 hi + lo {}\n",
                     mib(moe.scratch_bytes), mib(copy), mib(quantize), mib(split_scales), mib(bf16));
  return out;
}

}  // namespace m2::cuda
