// The work plan of FlashInfer's persistent Hopper prefill kernel
// (flashinfer_prefill.h): FlashInfer's own planner (PrefillSM90Plan) needs a
// page-locked buffer and copies the plan itself; this is the same greedy rule
// over our sequences, packed for the backend's one upload.
#include <algorithm>
#include <numeric>
#include <queue>

#include "backend/cuda/attention/flashinfer_prefill.h"

namespace m2::cuda {

FlashInferPlan plan_flashinfer_prefill(std::span<const FlashInferSeq> seqs, int heads, int ctas) {
  struct Item {
    int32_t tile, seq, head;
  };
  std::vector<std::vector<Item>> per_cta(static_cast<size_t>(ctas));
  // Longest context first, then each sequence's tiles last (most keys) first.
  std::vector<int32_t> order(seqs.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int32_t a, int32_t b) { return seqs[a].context_len > seqs[b].context_len; });
  using Load = std::pair<int64_t, int>;  // (cost so far, cta): the least loaded first, ties to the lower cta
  std::priority_queue<Load, std::vector<Load>, std::greater<Load>> loads;
  for (int c = 0; c < ctas; ++c) loads.push({0, c});
  for (int h = 0; h < heads; ++h)
    for (int32_t s : order) {
      const FlashInferSeq& q = seqs[s];
      const int tiles = (q.rows + kFlashInferTileRows - 1) / kFlashInferTileRows;
      for (int t = tiles - 1; t >= 0; --t) {
        auto [cost, c] = loads.top();
        loads.pop();
        const int64_t keys =
            std::min<int64_t>(q.context_len, int64_t{q.context_len} - q.rows + int64_t{t + 1} * kFlashInferTileRows);
        loads.push({cost + 2 * kFlashInferTileRows + keys, c});
        per_cta[static_cast<size_t>(c)].push_back({t, s, h});
      }
    }

  FlashInferPlan p;
  p.ctas = ctas;
  for (const auto& v : per_cta) p.items += static_cast<int64_t>(v.size());
  auto section = [&](int64_t n) {  // 16-byte aligned
    const int64_t off = static_cast<int64_t>(p.packed.size());
    p.packed.resize(static_cast<size_t>(off + (n + 3) / 4 * 4), 0);
    return off;
  };
  p.qo_tile = section(p.items), p.qo_start = section(p.items), p.kv_page_start = section(p.items);
  p.qo_len = section(p.items), p.kv_len = section(p.items), p.head = section(p.items);
  p.work_indptr = section(ctas + 1), p.batch = section(p.items);
  int64_t i = 0;
  for (int c = 0; c < ctas; ++c) {
    for (const Item& it : per_cta[static_cast<size_t>(c)]) {
      const FlashInferSeq& q = seqs[it.seq];
      p.packed[p.qo_tile + i] = it.tile;
      p.packed[p.qo_start + i] = q.first_row;
      p.packed[p.kv_page_start + i] = q.page_offset;
      p.packed[p.qo_len + i] = q.rows;
      p.packed[p.kv_len + i] = q.context_len;
      p.packed[p.head + i] = it.head;
      p.packed[p.batch + i] = it.seq;
      ++i;
    }
    p.packed[p.work_indptr + c + 1] = static_cast<int32_t>(i);
  }
  return p;
}

}  // namespace m2::cuda

#if !M2CPP_WITH_FLASHINFER
namespace m2::cuda {
// A build without the FlashInfer headers: the backend keeps its own prefill kernel.
bool flashinfer_prefill_built() { return false; }
cudaError_t launch_flashinfer_prefill(const FlashInferPrefillArgs&, cudaStream_t) { return cudaErrorNotSupported; }
}  // namespace m2::cuda
#endif
