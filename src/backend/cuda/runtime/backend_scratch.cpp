// CudaBackend::reserve_scratch: every op scratch buffer at the size
// scratch_plan.h computes for the largest step within the engine's limits,
// allocated before the KV cache so that serving allocates nothing (a buffer
// that still grows logs a warning naming it).
#include "backend/cuda/runtime/backend_impl.h"
#include "backend/cuda/runtime/scratch_plan.h"
#include "util/log.h"

namespace m2::cuda {

Result<size_t> CudaBackend::reserve_scratch(const ModelConfig& config, const StepLimits& limits) {
  if (limits.max_tokens <= 0 || limits.max_seqs <= 0 || limits.max_logit_rows <= 0 || limits.max_context <= 0)
    return errorf("reserve_scratch: step limits must be positive ({} tokens, {} sequences, {} logit rows, {} context)",
                  limits.max_tokens, limits.max_seqs, limits.max_logit_rows, limits.max_context);
  bind_device();
  const size_t free_before = memory_info().free_bytes;
  const ScratchPlan p = plan_scratch(config, limits, options_, caps_);
  if (p.total() > free_before)
    return errorf("the step scratch for {} tokens per step needs {:.2f} GiB but CUDA device {} has {:.2f} GiB free "
                  "(lower --max-num-batched-tokens or --max-num-seqs)",
                  limits.max_tokens, p.total() / 1073741824.0, device_, free_before / 1073741824.0);
  route_logits_.reserve_up_front(p.route_logits, stream_);
  route_counters_.reserve_up_front(p.route_counters, stream_, true);
  moe_scratch_.reserve_up_front(p.moe, stream_);
  if (p.moe_counters) moe_counters_.reserve_up_front(p.moe_counters, stream_, true);
  moe_local_routing_.reserve_up_front(p.moe_local_routing, stream_);
  if (p.attn_partials) attn_partials_.reserve_up_front(p.attn_partials, stream_);
  if (p.attn_decode_partials) attn_decode_partials_.reserve_up_front(p.attn_decode_partials, stream_);
  if (p.attn_counters) attn_counters_.reserve_up_front(p.attn_counters, stream_, true);
  attn_meta_.reserve_up_front(p.attn_meta, stream_);
  if (flashinfer_prefill_ && p.flashinfer_q) {
    fi_q_.reserve_up_front(p.flashinfer_q, stream_);
    fi_o_.reserve_up_front(p.flashinfer_q, stream_);
    fi_plan_device_.reserve_up_front(p.flashinfer_plan, stream_);
    if (p.flashinfer_pages) {
      fi_k_.reserve_up_front(p.flashinfer_pages, stream_);
      fi_v_.reserve_up_front(p.flashinfer_pages, stream_);
      fi_pages_device_.reserve_up_front(p.flashinfer_page_ids, stream_);
    }
  }
  if (fp8_matmul_.mode() != Fp8GemmMode::kOff) fp8_matmul_.reserve(p.fp8_quant_elems, stream_);
  fp8_copy_.reserve(static_cast<size_t>(p.fp8_copy_elems), stream_);
  bf16_matmul_.reserve(p.bf16_split_elems, stream_);
  route_gemm_.reserve(stream_);
  const size_t T = static_cast<size_t>(limits.max_tokens), R = static_cast<size_t>(limits.max_logit_rows);
  ids_.reserve_up_front(sizeof(int32_t) * T, stream_);
  positions_.reserve_up_front(sizeof(int32_t) * T, stream_);
  slots_.reserve_up_front(sizeof(int64_t) * T, stream_);
  rows_.reserve_up_front(sizeof(int64_t) * R, stream_);
  sample_args_.reserve_up_front(sizeof(SampleRowArgs) * R, stream_);
  sample_results_.reserve_up_front(sizeof(SampleRowResult) * R, stream_);
  M2_CUDA_CHECK(cudaStreamSynchronize(stream_), "reserving the step scratch");
  const size_t free_after = memory_info().free_bytes;
  const size_t used = free_before > free_after ? free_before - free_after : 0;
  log_info("CUDA device {}: step scratch for {} tokens, {} sequences, {} logit rows, {} tokens of context: {:.2f} GiB "
           "({:.2f} planned)",
           device_, limits.max_tokens, limits.max_seqs, limits.max_logit_rows, limits.max_context, used / 1073741824.0,
           p.total() / 1073741824.0);
  return used;
}

}  // namespace m2::cuda
