// Causal GQA attention over the paged KV cache on the CPU. One task per
// (token, kv head): the group of q heads sharing a kv head reads each key
// and value once. Softmax in fp32 with the max subtracted.
#include <algorithm>
#include <cmath>
#include <limits>

#include "backend/cpu/cpu_backend.h"

namespace m2::cpu {

ActCopy CpuBackend::attention(Act q, const KvCache& cache, int layer, std::span<const SeqSlice> seqs,
                              int num_heads, float scale, Act out) {
  const KvCacheShape& s = cache.shape();
  const int64_t hd = s.head_dim;
  const int kv_heads = s.num_kv_heads;
  const int G = num_heads / kv_heads;
  const int64_t bs = s.block_size;
  const int64_t token_stride = s.token_elems();  // elements between consecutive tokens of one head
  const size_t esz = dtype_size(s.dtype);
  const uint8_t* kbase = static_cast<const uint8_t*>(cache.k_base(layer));
  const uint8_t* vbase = static_cast<const uint8_t*>(cache.v_base(layer));
  const float* kscales = cache.k_scales(layer);  // FP8 caches: one scale per (token, kv head)
  const float* vscales = cache.v_scales(layer);

  // Tasks: (row, kv head) over all sequences.
  std::vector<std::pair<const SeqSlice*, int64_t>> rows;  // (sequence, row within it)
  for (const SeqSlice& sq : seqs)
    for (int64_t i = 0; i < sq.num_rows; ++i) rows.push_back({&sq, i});
  const int64_t n_tasks = static_cast<int64_t>(rows.size()) * kv_heads;

  pool_.parallel_for(n_tasks, [&](int64_t task, int) {
    const auto [sq, i] = rows[task / kv_heads];
    const int g = static_cast<int>(task % kv_heads);
    const int64_t row = sq->first_row + i;
    const int64_t n_keys = sq->context_len - sq->num_rows + i + 1;  // causal: keys 0..position
    const float* qg = q.data + row * q.cols + static_cast<int64_t>(g) * G * hd;
    float* og = out.data + row * out.cols + static_cast<int64_t>(g) * G * hd;

    thread_local std::vector<float> scores;
    scores.resize(static_cast<size_t>(G) * n_keys);
    for (int64_t b = 0; b * bs < n_keys; ++b) {
      const int64_t n = std::min(bs, n_keys - b * bs);
      const int64_t first_head = static_cast<int64_t>(sq->block_table[b]) * bs * kv_heads + g;  // (token, head) index
      const int64_t first = first_head * hd;
      k_.attn_scores(qg, G, hd, kbase + first * esz, s.dtype, n, token_stride, kscales ? kscales + first_head : nullptr,
                     kv_heads, scale, scores.data() + b * bs, n_keys);
    }
    for (int h = 0; h < G; ++h) {
      float* sc = scores.data() + h * n_keys;
      float m = -std::numeric_limits<float>::infinity();
      for (int64_t j = 0; j < n_keys; ++j) m = std::max(m, sc[j]);
      double sum = 0;
      for (int64_t j = 0; j < n_keys; ++j) {
        sc[j] = std::exp(sc[j] - m);
        sum += sc[j];
      }
      const float inv = static_cast<float>(1.0 / sum);
      for (int64_t j = 0; j < n_keys; ++j) sc[j] *= inv;
    }
    std::fill(og, og + G * hd, 0.0f);
    for (int64_t b = 0; b * bs < n_keys; ++b) {
      const int64_t n = std::min(bs, n_keys - b * bs);
      const int64_t first_head = static_cast<int64_t>(sq->block_table[b]) * bs * kv_heads + g;
      const int64_t first = first_head * hd;
      k_.attn_accum(scores.data() + b * bs, n_keys, G, vbase + first * esz, s.dtype, n, token_stride,
                    vscales ? vscales + first_head : nullptr, kv_heads, hd, og);
    }
  });
  return {};
}

}  // namespace m2::cpu
