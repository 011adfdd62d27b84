// FlashInfer's Hopper prefill kernel over BF16 paged caches
// (flashinfer_prefill.h): one instantiation — head_dim 128, causal, no
// sliding window, no soft cap, bf16 q/k/v/o, int32 ids, the persistent
// scheduler with a plan per head. Compiled only when CMake finds the
// headers (M2CPP_FLASHINFER), for sm_90a only.
#include <flashinfer/attention/hopper/default_params.cuh>
#include <flashinfer/attention/hopper/prefill_sm90.cuh>
#include <flashinfer/attention/hopper/variants.cuh>
#include <flashinfer/attention/mask.cuh>

#include "backend/cuda/attention/flashinfer_prefill.h"

namespace m2::cuda {
namespace {
using Bf16 = cutlass::bfloat16_t;
using Params = flashinfer::BatchPrefillPagedParams<Bf16, Bf16, Bf16, int32_t>;
}  // namespace

bool flashinfer_prefill_built() { return true; }

cudaError_t launch_flashinfer_prefill(const FlashInferPrefillArgs& a, cudaStream_t stream) {
  if (!a.layout || !a.plan || !a.page_ids || a.kv_heads <= 0 || a.heads % a.kv_heads != 0 || a.block_size <= 0 ||
      a.T <= 0)
    return cudaErrorInvalidValue;
  const FlashInferPlan& L = *a.layout;
  int32_t* plan = const_cast<int32_t*>(a.plan);  // FlashInfer's params are not const-qualified; nothing writes them
  Params p{};
  p.q_ptr = const_cast<Bf16*>(static_cast<const Bf16*>(a.q));
  p.k_ptr = const_cast<Bf16*>(static_cast<const Bf16*>(a.k_cache));
  p.v_ptr = const_cast<Bf16*>(static_cast<const Bf16*>(a.v_cache));
  p.o_ptr = static_cast<Bf16*>(a.o);
  p.lse_ptr = nullptr;
  p.qo_tile_indices = plan + L.qo_tile;
  p.qo_indptr = plan + L.qo_start;
  p.kv_indptr = plan + L.kv_page_start;
  p.kv_indices = const_cast<int32_t*>(a.page_ids);
  p.qo_lens = plan + L.qo_len;
  p.kv_lens = plan + L.kv_len;
  p.head_indices = plan + L.head;
  p.work_indptr = plan + L.work_indptr;
  p.batch_indices = plan + L.batch;
  p.additional_params = {};
  p.additional_params.sm_scale = a.scale;
  // Elements: a query row holds every head, a cache slot every kv head, a
  // page block_size slots; K and V share their layout.
  const int64_t row = int64_t{a.heads} * kFlashInferHeadDim, slot = int64_t{a.kv_heads} * kFlashInferHeadDim;
  p.q_stride_n = p.o_stride_n = row;
  p.q_stride_h = p.o_stride_h = kFlashInferHeadDim;
  p.k_stride_n = p.v_stride_n = slot;
  p.k_stride_h = p.v_stride_h = kFlashInferHeadDim;
  p.k_page_stride = p.v_page_stride = slot * a.block_size;
  p.nnz_qo = a.T;
  p.num_qo_heads = a.heads;
  p.num_kv_heads = a.kv_heads;
  p.group_size = a.heads / a.kv_heads;
  p.page_size = a.block_size;
  p.window_left = -1;
  p.causal = true;
  return flashinfer::BatchPrefillWithPagedKVCacheDispatched<kFlashInferHeadDim, kFlashInferHeadDim,
                                                            flashinfer::MaskMode::kCausal, /*sliding window*/ false,
                                                            /*same schedule for all heads*/ false,
                                                            flashinfer::StandardAttention, Params>(p, false, stream);
}

}  // namespace m2::cuda
