#include "model/weight_shard.h"

#include <cstdlib>
#include <cstring>
#include <string>

#include "util/mapped_file.h"

namespace m2 {
namespace {

// A slice [begin, end) of `n` along an FP8 weight's dimension with blocks of
// `block` must start on a block and end on one (or at the end).
Status check_block_slice(const char* what, int64_t begin, int64_t end, int64_t n, int block, const char* flag) {
  if (begin % block == 0 && (end % block == 0 || end == n)) return Status();
  return errorf("{}: a rank's slice [{}, {}) of {} does not fall on the FP8 weights' {}-wide scale blocks ({}); "
                "choose a tensor-parallel size whose slices are multiples of {}",
                what, begin, end, n, block, flag, block);
}

// Rows [begin, end) of a 2-D view whose rows are `ld` elements apart.
TensorView row_view(const TensorView& t, int64_t ld, int64_t begin, int64_t end) {
  TensorView out = t;
  out.data = static_cast<const uint8_t*>(t.data) + static_cast<size_t>(begin * ld) * dtype_size(t.dtype);
  out.shape = Shape{end - begin, t.shape[1]};
  return out;
}

// Rows [begin, end) of a [rows, cols] Linear: a view (and the scales' rows).
Result<Linear> row_slice(const Linear& w, int64_t begin, int64_t end, const char* what) {
  Linear out = w;
  out.weight = row_view(w.weight, w.ld(), begin, end);
  out.prepared = nullptr;
  if (w.is_fp8()) {
    M2_RETURN_IF_ERROR(check_block_slice(what, begin, end, w.out_features(), w.block_rows, "output rows"));
    const int64_t sc = w.scale_inv.shape[1], b0 = begin / w.block_rows;
    const int64_t b1 = (end + w.block_rows - 1) / w.block_rows;
    out.scale_inv.data = w.scale_inv.as<float>() + b0 * sc;
    out.scale_inv.shape = Shape{b1 - b0, sc};
  }
  return out;
}

// Columns [begin, end) of a [rows, cols] Linear: a view of the columns, its
// rows w.ld() elements apart (so a rank reads only its own bytes of each
// row from the mapping), and an owned copy of the scales' columns (a few KB)
// kept in the shard's `owned`. For a dummy FP8 weight generated on the GPU,
// a placeholder of its own.
Result<Linear> column_slice(const Linear& w, int64_t begin, int64_t end, const char* what, ModelWeights& shard) {
  Linear out = w;
  const int64_t rows = w.out_features(), cols = w.in_features();
  // A dummy FP8 weight generated on the GPU has no host bytes: the slice is
  // a placeholder of its own, its elements a window of the tensor's.
  if (auto dummy = shard.dummy_fp8.find(w.weight.data); dummy != shard.dummy_fp8.end()) {
    M2_ASSIGN_OR_RETURN(std::shared_ptr<void> place, reserve_inaccessible(static_cast<size_t>(rows * (end - begin))));
    out.weight.data = place.get();
    out.weight.shape = Shape{rows, end - begin};
    ModelWeights::DummyFp8 d = dummy->second;
    if (d.full_cols != 0) return errorf("{}: a column slice of a column slice", what);
    d.elements = rows * (end - begin), d.full_cols = cols, d.col_begin = begin, d.cols = end - begin;
    shard.dummy_fp8[place.get()] = d;
    shard.placeholders.push_back(std::move(place));
  } else {
    out.weight.data = static_cast<const uint8_t*>(w.weight.data) + static_cast<size_t>(begin) * dtype_size(w.weight.dtype);
    out.weight.shape = Shape{rows, end - begin};
    out.row_stride = w.ld();
  }
  out.prepared = nullptr;
  if (w.is_fp8()) {
    M2_RETURN_IF_ERROR(check_block_slice(what, begin, end, cols, w.block_cols, "input columns"));
    // [rows / 128, cols / 128] fp32, contiguous: the columns of the slice copied.
    const int64_t sr = w.scale_inv.shape[0], sc = w.scale_inv.shape[1];
    const int64_t c0 = begin / w.block_cols, c1 = (end + w.block_cols - 1) / w.block_cols;
    auto buf = std::make_unique<uint8_t[]>(static_cast<size_t>(sr * (c1 - c0)) * sizeof(float));
    for (int64_t i = 0; i < sr; ++i)
      std::memcpy(buf.get() + static_cast<size_t>(i * (c1 - c0)) * sizeof(float), w.scale_inv.as<float>() + i * sc + c0,
                  static_cast<size_t>(c1 - c0) * sizeof(float));
    out.scale_inv.data = buf.get();
    out.scale_inv.shape = Shape{sr, c1 - c0};
    shard.owned.push_back(std::move(buf));
  }
  return out;
}

Weight vector_slice(const Weight& w, int64_t begin, int64_t end) {
  if (w.empty()) return w;
  Weight out = w;
  out.data = static_cast<const uint8_t*>(w.data) + static_cast<size_t>(begin) * dtype_size(w.dtype);
  out.shape = Shape{end - begin};
  out.prepared = nullptr;
  return out;
}

}  // namespace

Status check_parallel(const ModelConfig& c, const ParallelConfig& p) {
  const int tp = p.tensor_parallel_size;
  if (tp < 1) return errorf("--tensor-parallel-size {}: must be at least 1", tp);
  if (tp == 1) return Status();
  if (c.num_attention_heads % tp != 0)
    return errorf("--tensor-parallel-size {} does not divide the model's {} attention heads", tp, c.num_attention_heads);
  const int kv = c.num_key_value_heads;
  if (tp <= kv ? kv % tp != 0 : tp % kv != 0)
    return errorf("--tensor-parallel-size {} over {} kv heads: it must divide them, or above them be a multiple of "
                  "them (each kv head then replicated on tp/{} ranks)",
                  tp, kv, kv);
  if (p.expert_parallel) {
    if (c.num_local_experts % tp != 0)
      return errorf("--enable-expert-parallel: --tensor-parallel-size {} does not divide the model's {} experts", tp,
                    c.num_local_experts);
  } else if (c.intermediate_size % tp != 0) {
    return errorf("--tensor-parallel-size {} does not divide the experts' intermediate size {} (--enable-expert-parallel "
                  "splits whole experts instead)",
                  tp, c.intermediate_size);
  }
  if (c.fp8) {  // every FP8 slice on the scale blocks
    const RankLayout l = rank_layout(c, p, 1);
    const int br = c.fp8->block_rows, bc = c.fp8->block_cols;
    auto need = [&](const char* module, const char* what, int64_t width, int block) -> Status {
      if (!c.is_fp8_module(module) || width % block == 0) return Status();
      return errorf("--tensor-parallel-size {}: a rank's {} of {} is {} wide, not a multiple of the FP8 scale block {}",
                    tp, what, module, width, block);
    };
    M2_RETURN_IF_ERROR(need("q_proj", "rows", int64_t{l.num_q_heads} * c.head_dim, br));
    M2_RETURN_IF_ERROR(need("o_proj", "columns", int64_t{l.num_q_heads} * c.head_dim, bc));
    M2_RETURN_IF_ERROR(need("k_proj", "rows", int64_t{l.num_kv_heads} * c.head_dim, br));
    if (c.vocab_size % tp == 0) M2_RETURN_IF_ERROR(need("lm_head", "rows", c.vocab_size / tp, br));
    M2_RETURN_IF_ERROR(need("v_proj", "rows", int64_t{l.num_kv_heads} * c.head_dim, br));
    for (int r = 0; r < tp; ++r)
      M2_RETURN_IF_ERROR(need("k_proj", "first row", int64_t{rank_layout(c, p, r).kv_head_begin} * c.head_dim, br));
    if (!p.expert_parallel) {
      M2_RETURN_IF_ERROR(need("w1", "rows", l.inter_size, br));
      M2_RETURN_IF_ERROR(need("w3", "rows", l.inter_size, br));
      M2_RETURN_IF_ERROR(need("w2", "columns", l.inter_size, bc));
    }
  }
  return Status();
}

RankLayout rank_layout(const ModelConfig& c, const ParallelConfig& p, int rank) {
  const int tp = p.tensor_parallel_size, kv = c.num_key_value_heads;
  RankLayout l;
  l.num_q_heads = c.num_attention_heads / tp;
  l.q_head_begin = rank * l.num_q_heads;
  if (tp <= kv) {
    l.num_kv_heads = kv / tp;
    l.kv_head_begin = rank * l.num_kv_heads;
  } else {  // replicated: the kv head of this rank's q heads (they share one: tp/kv ranks per kv head)
    l.num_kv_heads = 1;
    l.kv_head_begin = rank * kv / tp;
  }
  if (p.expert_parallel) {
    l.inter_begin = 0, l.inter_size = c.intermediate_size;
    l.expert_begin = rank * (c.num_local_experts / tp);
    l.expert_end = l.expert_begin + c.num_local_experts / tp;
  } else {
    l.inter_size = c.intermediate_size / tp;
    l.inter_begin = rank * l.inter_size;
    l.expert_begin = 0, l.expert_end = c.num_local_experts;
  }
  return l;
}

TensorShare tensor_share(const ModelConfig& c, const ParallelConfig& p, int rank, const std::string& name) {
  if (p.tensor_parallel_size <= 1) return {};
  const RankLayout l = rank_layout(c, p, rank);
  auto has = [&](const char* part) { return name.find(part) != std::string::npos; };
  if (has("self_attn.q_proj.") || has("self_attn.q_norm.") || has("self_attn.o_proj."))
    return {l.num_q_heads, c.num_attention_heads};
  if (has("self_attn.k_proj.") || has("self_attn.v_proj.") || has("self_attn.k_norm."))
    return {l.num_kv_heads, c.num_key_value_heads};
  if (const size_t at = name.find("block_sparse_moe.experts."); at != std::string::npos) {
    const int e = std::atoi(name.c_str() + at + std::char_traits<char>::length("block_sparse_moe.experts."));
    if (p.expert_parallel) return {e >= l.expert_begin && e < l.expert_end ? 1 : 0, 1};
    return {l.inter_size, c.intermediate_size};
  }
  if ((name.rfind("lm_head.", 0) == 0 || has("embed_tokens.")) && c.vocab_size % p.tensor_parallel_size == 0)
    return {1, p.tensor_parallel_size};
  return {};
}

Result<std::unique_ptr<ModelWeights>> shard_weights(const ModelWeights& full, const ParallelConfig& p, int rank) {
  const ModelConfig& c = full.config;
  M2_RETURN_IF_ERROR(check_parallel(c, p));
  if (rank < 0 || rank >= p.tensor_parallel_size)
    return errorf("rank {} outside a group of {}", rank, p.tensor_parallel_size);
  const RankLayout l = rank_layout(c, p, rank);
  auto w = std::make_unique<ModelWeights>();
  w->config = c;
  // Dummy FP8 weights generated on the GPU: row slices view the tensors'
  // placeholders (their first element the offset), column slices get their own.
  w->dummy_fp8 = full.dummy_fp8;
  w->placeholders = full.placeholders;
  w->config.num_attention_heads = l.num_q_heads;
  w->config.num_key_value_heads = l.num_kv_heads;
  w->config.intermediate_size = static_cast<int>(l.inter_size);
  w->embed = full.embed;
  w->final_norm = full.final_norm;
  w->embed.prepared = w->final_norm.prepared = nullptr;
  if (c.vocab_size % p.tensor_parallel_size == 0) {  // this rank's vocabulary rows; else all of them
    const int64_t v = c.vocab_size / p.tensor_parallel_size;
    M2_ASSIGN_OR_RETURN(w->lm_head, row_slice(full.lm_head, rank * v, (rank + 1) * v, "lm_head"));
    w->embed = row_view(full.embed, full.embed.shape[1], rank * v, (rank + 1) * v);  // (not prepared)
    w->embed_first_id = rank * v;
  } else {
    w->lm_head = full.lm_head;
    w->lm_head.prepared = nullptr;
  }
  const int64_t hd = c.head_dim;
  const int64_t q0 = l.q_head_begin * hd, q1 = q0 + l.num_q_heads * hd;
  const int64_t k0 = l.kv_head_begin * hd, k1 = k0 + l.num_kv_heads * hd;
  for (const LayerWeights& L : full.layers) {
    LayerWeights& R = w->layers.emplace_back();
    R.input_norm = L.input_norm, R.post_attention_norm = L.post_attention_norm;
    R.input_norm.prepared = R.post_attention_norm.prepared = nullptr;
    M2_ASSIGN_OR_RETURN(R.q_proj, row_slice(L.q_proj, q0, q1, "q_proj"));
    M2_ASSIGN_OR_RETURN(R.k_proj, row_slice(L.k_proj, k0, k1, "k_proj"));
    M2_ASSIGN_OR_RETURN(R.v_proj, row_slice(L.v_proj, k0, k1, "v_proj"));
    M2_ASSIGN_OR_RETURN(R.o_proj, column_slice(L.o_proj, q0, q1, "o_proj", *w));
    R.q_norm = vector_slice(L.q_norm, q0, q1);
    R.k_norm = vector_slice(L.k_norm, k0, k1);
    R.router = L.router, R.router_bias = L.router_bias;
    R.router.prepared = R.router_bias.prepared = nullptr;
    R.experts.resize(L.experts.size());  // the experts of other ranks stay empty
    const int64_t i0 = l.inter_begin, i1 = i0 + l.inter_size;
    for (int e = l.expert_begin; e < l.expert_end; ++e) {
      const ExpertWeights& E = L.experts[e];
      ExpertWeights& X = R.experts[e];
      if (p.expert_parallel) {
        X = E;
        X.w1.prepared = X.w2.prepared = X.w3.prepared = nullptr;
        continue;
      }
      M2_ASSIGN_OR_RETURN(X.w1, row_slice(E.w1, i0, i1, "w1"));
      M2_ASSIGN_OR_RETURN(X.w3, row_slice(E.w3, i0, i1, "w3"));
      M2_ASSIGN_OR_RETURN(X.w2, column_slice(E.w2, i0, i1, "w2", *w));
    }
  }
  return w;
}

}  // namespace m2
