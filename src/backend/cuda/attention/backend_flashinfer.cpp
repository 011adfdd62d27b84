// CudaBackend's prefill attention through FlashInfer's Hopper kernel
// (flashinfer_prefill.h): the step's prefill sequences, their pages, the work
// plan, and the bf16 copies around the kernel.
#include <algorithm>

#include "backend/cuda/attention/attention.h"
#include "backend/cuda/attention/bf16_convert.h"
#include "backend/cuda/runtime/backend_impl.h"

namespace m2::cuda {

void CudaBackend::attention_prefill_flashinfer(Act q, const AttnMeta& meta, std::span<const SeqSlice> seqs,
                                               const AttentionArgs& a, int heads, Fp8Out out8, Act out) {
  // A BF16 cache is read in place, through the block tables uploaded with
  // the work list. FP8 pages are first copied to bf16 (code x scale, as the
  // CPU reads them, then rounded) into a compact scratch whose page i is the
  // i-th of the list: FlashInfer's FP8 kernel takes one scale per head, ours
  // are per key and head. A page several sequences share (a common prefix)
  // is copied once, so the copies never exceed the cache's blocks
  // (scratch_plan.h sizes them so).
  const bool fp8 = a.dtype == DType::kF8E4M3;
  std::vector<FlashInferSeq> list;
  fi_pages_host_.clear();   // FP8: the distinct source pages, then the sequences' tables into them
  fi_tables_host_.clear();
  ++fi_page_stamp_;
  for (int32_t i : meta.prefill_seqs) {
    const AttnSeq& sq = meta.seqs[static_cast<size_t>(i)];
    int32_t page_offset = sq.table_offset;
    if (fp8) {
      const std::span<const int32_t> table = seqs[static_cast<size_t>(i)].block_table;
      const size_t n = std::min<size_t>((sq.context_len + a.block_size - 1) / a.block_size, table.size());
      page_offset = static_cast<int32_t>(fi_tables_host_.size());
      for (size_t j = 0; j < n; ++j) {
        const auto b = static_cast<size_t>(table[j]);
        if (b >= fi_page_slot_.size()) fi_page_slot_.resize(b + 1, {0, 0});
        auto& [stamp, slot] = fi_page_slot_[b];
        if (stamp != fi_page_stamp_) {
          stamp = fi_page_stamp_;
          slot = static_cast<int32_t>(fi_pages_host_.size());
          fi_pages_host_.push_back(table[j]);
        }
        fi_tables_host_.push_back(slot);
      }
    }
    list.push_back({sq.first_row, sq.num_rows, sq.context_len, page_offset});
  }
  auto context = [&] {
    return fmt::format("FlashInfer prefill attention of q [{}, {}] over a {} cache ({} prefill sequences, {} kv "
                       "heads, blocks of {})",
                       q.rows, q.cols, dtype_name(a.dtype), list.size(), a.kv_heads, a.block_size);
  };
  if (q.cols != int64_t{heads} * kFlashInferHeadDim || out.cols != q.cols || out.rows != q.rows)
    die(cudaErrorInvalidValue, "attention (prefill)", context(), __FILE__, __LINE__);
  fi_plan_ = plan_flashinfer_prefill(list, heads, num_sms_);
  const size_t bf16_bytes = static_cast<size_t>(q.rows * q.cols) * 2;
  FlashInferPrefillArgs f;
  f.plan = static_cast<const int32_t*>(upload(fi_plan_device_, fi_plan_.packed.data(),
                                              fi_plan_.packed.size() * sizeof(int32_t), "the FlashInfer prefill plan"));
  f.layout = &fi_plan_;
  void* q16 = fi_q_.reserve(bf16_bytes, stream_);
  f.q = q16;
  f.o = fi_o_.reserve(bf16_bytes, stream_);
  f.k_cache = a.k_cache, f.v_cache = a.v_cache, f.page_ids = a.block_tables;
  f.T = q.rows, f.heads = heads, f.kv_heads = a.kv_heads, f.block_size = a.block_size, f.scale = a.scale;
  if (fp8) {
    const int64_t n = static_cast<int64_t>(fi_pages_host_.size());  // distinct pages
    fi_pages_host_.insert(fi_pages_host_.end(), fi_tables_host_.begin(), fi_tables_host_.end());
    const auto* pages = static_cast<const int32_t*>(upload(fi_pages_device_, fi_pages_host_.data(),
                                                           fi_pages_host_.size() * sizeof(int32_t),
                                                           "the FP8 pages for FlashInfer"));
    const size_t bytes = static_cast<size_t>(n) * a.block_size * a.kv_heads * kFlashInferHeadDim * 2;
    void* k16 = fi_k_.reserve(bytes, stream_);
    void* v16 = fi_v_.reserve(bytes, stream_);
    check(launch_fp8_pages_to_bf16(static_cast<const uint8_t*>(a.k_cache), a.k_scales, pages, n, a.block_size,
                                   a.kv_heads, kFlashInferHeadDim, k16, stream_),
          "attention (prefill)", context);
    check(launch_fp8_pages_to_bf16(static_cast<const uint8_t*>(a.v_cache), a.v_scales, pages, n, a.block_size,
                                   a.kv_heads, kFlashInferHeadDim, v16, stream_),
          "attention (prefill)", context);
    f.k_cache = k16, f.v_cache = v16, f.page_ids = pages + n;
  }
  check(launch_f32_to_bf16(q.data, q.rows * q.cols, q16, stream_), "attention (prefill)", context);
  check(launch_flashinfer_prefill(f, stream_), "attention (prefill)", context);
  // Every row: those of other kernels' sequences are rewritten by them after this.
  check(launch_bf16_to_f32(f.o, q.rows, q.cols, out.data, out8, stream_), "attention (prefill)", context);
}

}  // namespace m2::cuda
