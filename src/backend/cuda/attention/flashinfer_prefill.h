// Prefill attention over BF16 paged caches by FlashInfer's Hopper kernel
// (FlashAttention-3's design: TMA loads of Q, a producer warpgroup gathering
// the K/V pages with cp.async, two consumer warpgroups on wgmma with the
// softmax of one tile overlapping the products of the next), from the
// headers of the PyPI package flashinfer-python (scripts/setup.sh; CMake
// M2CPP_FLASHINFER). Plain C++ here: the work plan is a host rule tested
// without a GPU; flashinfer_prefill.cu instantiates the kernel.
//
// The kernel reads q and writes o as bf16 [T, heads * 128] and the caches as
// stored ([blocks, block_size, kv_heads, 128], the page table = a sequence's
// block table); causal with the queries the last `rows` positions of each
// sequence (chunked prefill), as the backend's other attention kernels.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <span>
#include <vector>

namespace m2::cuda {

constexpr int kFlashInferHeadDim = 128;
constexpr int kFlashInferTileRows = 128;  // query rows per work item (the kernel's CTA_Q at head_dim 128)

// A sequence's prefill rows: rows [first_row, first_row + rows) of q and o,
// the last `rows` of its context_len keys, whose pages are
// page_ids[page_offset, page_offset + ceil(context_len / block_size)).
struct FlashInferSeq {
  int32_t first_row = 0, rows = 0, context_len = 0, page_offset = 0;
};

// The persistent kernel's work list: one item per (query tile, head, sequence),
// packed into one int32 array of 16-byte aligned sections (one upload). CTA c
// runs items [work_indptr[c], work_indptr[c + 1]), longest first; items go to
// the least loaded CTA, a tile costing 2 x its rows + the keys it sees
// (FlashInfer's own planner's rule).
struct FlashInferPlan {
  std::vector<int32_t> packed;
  int64_t qo_tile, qo_start, kv_page_start, qo_len, kv_len, head, work_indptr, batch;  // section offsets (int32s)
  int64_t items = 0;
  int ctas = 0;
};
FlashInferPlan plan_flashinfer_prefill(std::span<const FlashInferSeq> seqs, int heads, int ctas);

struct FlashInferPrefillArgs {
  const void* q = nullptr;  // bf16 [T, heads * 128]
  void* o = nullptr;        // bf16 [T, heads * 128]
  const void* k_cache = nullptr;  // bf16 [blocks, block_size, kv_heads, 128]
  const void* v_cache = nullptr;
  const int32_t* page_ids = nullptr;  // device: the sequences' block tables (FlashInferSeq::page_offset)
  const int32_t* plan = nullptr;      // device copy of FlashInferPlan::packed
  const FlashInferPlan* layout = nullptr;  // its section offsets
  int64_t T = 0;
  int heads = 0, kv_heads = 0, block_size = 0;
  float scale = 0;
};

// False when the build has no FlashInfer headers (or no sm_90a code).
bool flashinfer_prefill_built();
cudaError_t launch_flashinfer_prefill(const FlashInferPrefillArgs& a, cudaStream_t stream);

}  // namespace m2::cuda
