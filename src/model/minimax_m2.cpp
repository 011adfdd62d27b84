#include "model/minimax_m2.h"

#include <algorithm>
#include <bit>
#include <cmath>

#include "model/node_call.h"
#include "model/node_group.h"
#include "model/tensor_parallel.h"
#include "util/log.h"

namespace m2 {
namespace {
// Scratch buffer slots.
enum Slot { kX, kH, kQ, kK, kV, kAttn, kOut, kSel, kLogits, kRouteIds, kRouteW, kSumSq, kLogitsPart, kNumSlots };

// A group's cache is one cache per rank (MiniMaxM2::make_kv_cache of a group).
Status check_rank_caches(const KvCache& cache, int ranks) {
  if (cache.num_ranks() != ranks)
    return errorf("forward: a KV cache of {} rank caches for a group of {} ranks (use the model's make_kv_cache)",
                  cache.num_ranks(), ranks);
  return Status();
}
}  // namespace

MiniMaxM2::MiniMaxM2(const ModelWeights& weights, Backend& backend)
    : weights_(&weights), backend_(backend), scratch_(kNumSlots) {}

MiniMaxM2::MiniMaxM2(const ModelWeights& weights, Backend& backend, Communicator* comm)
    : weights_(&weights), backend_(backend), comm_(comm), scratch_(kNumSlots) {}

MiniMaxM2::MiniMaxM2(const ModelWeights& weights, std::unique_ptr<TensorParallelGroup> group)
    : weights_(&weights), backend_(group->backend(0)), group_(std::move(group)), scratch_(kNumSlots) {}

MiniMaxM2::~MiniMaxM2() = default;

Result<std::unique_ptr<MiniMaxM2>> MiniMaxM2::tensor_parallel(
    const ModelWeights& weights, const ParallelConfig& parallel,
    const std::function<Result<std::unique_ptr<Backend>>(int rank)>& make_backend,
    const std::function<Result<std::vector<std::unique_ptr<Communicator>>>(std::span<Backend* const>)>& make_comms,
    std::shared_ptr<NodeGroup> nodes) {
  M2_ASSIGN_OR_RETURN(auto group, TensorParallelGroup::create(weights, parallel, make_backend, make_comms, std::move(nodes)));
  return std::unique_ptr<MiniMaxM2>(new MiniMaxM2(weights, std::move(group)));
}

int MiniMaxM2::parallel_size() const { return group_ ? group_->global_size() : comm_ ? comm_->size() : 1; }

std::span<const int32_t> MiniMaxM2::last_routing() const {
  return group_ ? group_->model(0).last_routing() : std::span<const int32_t>(routing_host_);
}

KvCacheShape MiniMaxM2::kv_shape(int block_size, int64_t num_blocks, DType dtype) const {
  if (group_) return group_->model(0).kv_shape(block_size, num_blocks, dtype);
  KvCacheShape s;
  s.num_layers = config().num_hidden_layers;
  s.num_kv_heads = config().num_key_value_heads;
  s.head_dim = config().head_dim;
  s.block_size = block_size;
  s.num_blocks = num_blocks;
  s.dtype = dtype;
  return s;
}

std::unique_ptr<KvCache> MiniMaxM2::make_kv_cache(int block_size, int64_t num_blocks, DType dtype) {
  if (group_) {
    std::vector<std::unique_ptr<KvCache>> ranks;
    for (int r = 0; r < group_->size(); ++r) ranks.push_back(group_->model(r).make_kv_cache(block_size, num_blocks, dtype));
    if (group_->nodes()) {  // the other nodes make theirs (a failure there fails the group's next step)
      NodeCall c;
      c.kind = NodeCall::Kind::kMakeKvCache, c.block_size = block_size, c.num_blocks = num_blocks, c.dtype = dtype;
      if (Status s = group_->run_call([&] { return encode_node_call(c); }, [](int) { return Status(); }); !s.ok())
        log_error("make_kv_cache: {}", s.message());
    }
    return std::make_unique<KvCache>(std::move(ranks));
  }
  const KvCacheShape s = kv_shape(block_size, num_blocks, dtype);
  return std::make_unique<KvCache>(s, backend_.allocate(KvCache::storage_bytes(s)));
}

Act MiniMaxM2::scratch(int index, int64_t rows, int64_t cols) {
  const size_t bytes = static_cast<size_t>(rows * cols) * sizeof(float);
  auto& [buf, size] = scratch_[index];
  if (size < bytes) {
    buf = backend_.allocate(bytes);
    size = bytes;
  }
  return Act{static_cast<float*>(buf.get()), rows, cols};
}

Result<size_t> MiniMaxM2::reserve(const StepLimits& limits) {
  if (group_) {  // every rank's scratch (its own step, its own cache shape: the same on every rank)
    std::vector<size_t> bytes(group_->size());
    auto call = [&] {
      NodeCall c;
      c.kind = NodeCall::Kind::kReserve, c.limits = limits;
      return encode_node_call(c);
    };
    M2_RETURN_IF_ERROR(group_->run_call(call, [&](int r) -> Status {
      M2_ASSIGN_OR_RETURN(bytes[r], group_->model(r).reserve(limits));
      return Status();
    }));
    size_t sum = 0;
    for (size_t b : bytes) sum += b;
    return sum;
  }
  const ModelConfig& c = config();
  const int64_t T = limits.max_tokens, R = std::min(limits.max_logit_rows, T);
  if (T <= 0 || R <= 0 || limits.max_seqs <= 0 || limits.max_context <= 0)
    return errorf("step limits: {} tokens, {} logit rows, {} sequences, {} tokens of context: all must be positive",
                  limits.max_tokens, limits.max_logit_rows, limits.max_seqs, limits.max_context);
  // The slots as run() takes them (routing ids are int32, as wide as a float).
  const std::pair<int, int64_t> widths[] = {{kX, c.hidden_size},        {kH, c.hidden_size},
                                            {kQ, c.q_dim()},            {kK, c.kv_dim()},
                                            {kV, c.kv_dim()},           {kAttn, c.q_dim()},
                                            {kOut, c.hidden_size},      {kRouteIds, c.num_experts_per_tok},
                                            {kRouteW, c.num_experts_per_tok}, {kSumSq, 2}};
  size_t bytes = 0;
  for (auto [slot, cols] : widths) bytes += static_cast<size_t>(T * cols) * sizeof(float), scratch(slot, T, cols);
  scratch(kSel, R, c.hidden_size);
  scratch(kLogits, R, c.vocab_size);
  bytes += static_cast<size_t>(R * (c.hidden_size + c.vocab_size)) * sizeof(float);
  if (const int64_t part = weights_->lm_head.out_features(); part != c.vocab_size) {  // a rank's vocabulary slice
    scratch(kLogitsPart, R, part);
    bytes += static_cast<size_t>(R * part) * sizeof(float);
  }
  M2_ASSIGN_OR_RETURN(const size_t ops, backend_.reserve_scratch(c, limits));
  reserved_ = limits;
  return bytes + ops;
}

int64_t MiniMaxM2::padded_rows(int64_t rows) const {
  const int64_t p = backend_.graph_rows(rows);
  // (beyond the reserved step the scratch would grow, retiring every graph)
  return reserved_.max_tokens > 0 && (p > reserved_.max_tokens || p > reserved_.max_seqs) ? rows : p;
}

Result<int64_t> MiniMaxM2::record_decode_graphs(KvCache& cache) {
  const int64_t max_seqs = reserved_.max_seqs, max_context = reserved_.max_context;
  if (group_ || comm_ || max_seqs < 1 || max_context < 1) return int64_t{0};
  // The sizes steps of 1..max_seqs rows run at, those the backend records.
  std::vector<int64_t> sizes;
  for (int64_t r = 1; r <= std::min(max_seqs, backend_.max_graph_rows()); ++r) {
    const int64_t size = padded_rows(r);
    if (sizes.empty() || sizes.back() != size) sizes.push_back(size);
  }
  // Contexts: one key, and 16K keys (or the most allowed), where the
  // backends' long-context decode kernels take over (graphs.cpp's classes).
  const int bs = cache.shape().block_size;
  const int64_t contexts[] = {1, std::min<int64_t>(max_context, 16384)};
  int64_t steps = 0;
  for (int64_t ctx : contexts) {
    const std::vector<int32_t> table(static_cast<size_t>((ctx + bs - 1) / bs), 0);  // block 0, read only
    for (int64_t n : sizes) {
      StepInput in;
      for (int64_t i = 0; i < n; ++i) {
        in.tokens.push_back(0);
        in.positions.push_back(static_cast<int32_t>(ctx - 1));
        in.slots.push_back(-1);  // (no KV written)
        in.seqs.push_back({i, 1, ctx, table});
      }
      // The first sighting of a shape runs eagerly, the second records it.
      for (int k = 0; k < 2; ++k, ++steps) M2_RETURN_IF_ERROR(forward(in, cache, nullptr));
    }
    if (contexts[1] == 1) break;
  }
  return steps;
}

const StepInput& MiniMaxM2::pad_decode_step(const StepInput& in) {
  const int64_t n = static_cast<int64_t>(in.tokens.size());
  const int64_t rows = padded_rows(n);
  if (rows <= n) return in;
  // The copies are of the row of the sequence with the least context: the
  // same experts as that row (no more expert weights read) and the least
  // attention work.
  size_t t = 0;
  for (size_t i = 1; i < in.seqs.size(); ++i)
    if (in.seqs[i].context_len < in.seqs[t].context_len) t = i;
  StepInput& p = padded_;
  p.tokens.assign(in.tokens.begin(), in.tokens.end());
  p.positions.assign(in.positions.begin(), in.positions.end());
  p.slots.assign(in.slots.begin(), in.slots.end());
  p.seqs.assign(in.seqs.begin(), in.seqs.end());
  p.logit_rows.assign(in.logit_rows.begin(), in.logit_rows.end());
  for (int64_t r = n; r < rows; ++r) {
    p.tokens.push_back(in.tokens[t]);
    p.positions.push_back(in.positions[t]);
    p.slots.push_back(-1);  // no KV written
    p.seqs.push_back({r, 1, in.seqs[t].context_len, in.seqs[t].block_table});
  }
  return p;
}

Status MiniMaxM2::forward(const StepInput& in, KvCache& cache, std::vector<float>* logits) {
  if (group_) {  // rank 0's logits (the other ranks compute none)
    M2_RETURN_IF_ERROR(check_rank_caches(cache, group_->size()));
    return group_->run_call([&] { return encode_forward_call(in); }, [&](int r) {
      return group_->model(r).forward(in, cache.rank(r), r == 0 ? logits : nullptr);
    });
  }
  M2_ASSIGN_OR_RETURN(Act lg, run(in, cache));
  if (!logits) return Status();
  logits->resize(static_cast<size_t>(lg.rows * lg.cols));
  if (lg.rows > 0) backend_.copy_to_host(lg.data, logits->data(), logits->size() * sizeof(float));
  return Status();
}

Status MiniMaxM2::forward_sample(const StepInput& in, KvCache& cache, std::span<const SampleRow> rows,
                                 std::span<SampledToken> out) {
  if (rows.size() != in.logit_rows.size())
    return errorf("forward_sample: {} sampling rows for {} logit rows", rows.size(), in.logit_rows.size());
  if (group_) {  // sampled on rank 0, where the logits are
    M2_RETURN_IF_ERROR(check_rank_caches(cache, group_->size()));
    return group_->run_call([&] { return encode_forward_call(in); }, [&](int r) {
      return r == 0 ? group_->model(0).forward_sample(in, cache.rank(0), rows, out)
                    : group_->model(r).forward(in, cache.rank(r), nullptr);
    });
  }
  M2_ASSIGN_OR_RETURN(Act lg, run(in, cache));
  if (lg.rows == 0) return Status();
  return backend_.sample(lg, rows, out);
}

Status MiniMaxM2::forward_sample(const StepInput& in, KvCache& cache, std::span<const SampleRow> rows,
                                 std::span<SampledToken> out, const std::function<void()>& before_sample) {
  if (rows.size() != in.logit_rows.size())
    return errorf("forward_sample: {} sampling rows for {} logit rows", rows.size(), in.logit_rows.size());
  if (group_) {
    if (Status s = check_rank_caches(cache, group_->size()); !s.ok()) {
      before_sample();
      return s;
    }
    return group_->run_call([&] { return encode_forward_call(in); }, [&](int r) {
      return r == 0 ? group_->model(0).forward_sample(in, cache.rank(0), rows, out, before_sample)
                    : group_->model(r).forward(in, cache.rank(r), nullptr);
    });
  }
  Result<Act> lg = run(in, cache);
  before_sample();  // also after a failed step: the caller's task may read what the step reads
  if (!lg.ok()) return lg.status();
  if (lg->rows == 0) return Status();
  return backend_.sample(*lg, rows, out);
}

NodeGroup* MiniMaxM2::node_group() const { return group_ ? group_->nodes() : nullptr; }

Status MiniMaxM2::follow_node_zero() {
  NodeGroup* nodes = group_ ? group_->nodes() : nullptr;
  if (!nodes || nodes->node_rank() == 0) return errorf("follow_node_zero: this model is not a node > 0 of a node group");
  std::unique_ptr<KvCache> cache;
  Status failed;  // this node's first failed call: the job failed
  for (;;) {
    Result<std::optional<std::vector<uint8_t>>> next = nodes->next_call();
    if (!next.ok()) return failed.ok() ? next.status() : failed;
    if (!*next) return failed;  // node 0 ended the job
    Result<NodeCall> call = decode_node_call(**next);
    Status s = call.status();
    if (call.ok()) switch (call->kind) {
        case NodeCall::Kind::kReserve:
          s = group_->run([&](int r) { return group_->model(r).reserve(call->limits).status(); });
          break;
        case NodeCall::Kind::kMakeKvCache: {
          std::vector<std::unique_ptr<KvCache>> ranks;
          for (int r = 0; r < group_->size(); ++r)
            ranks.push_back(group_->model(r).make_kv_cache(call->block_size, call->num_blocks, call->dtype));
          cache = std::make_unique<KvCache>(std::move(ranks));
          break;
        }
        case NodeCall::Kind::kForward:
          if (!cache) {
            s = errorf("node {}: a step before its KV cache was made", nodes->node_rank());
            break;
          }
          s = group_->run([&](int r) { return group_->model(r).forward(call->input, cache->rank(r), nullptr); });
          break;
      }
    const bool by_peer = !s.ok() && call.ok() && group_->stopped_by_peer();
    if (!s.ok() && failed.ok()) failed = s;
    M2_RETURN_IF_ERROR(nodes->reply(s, by_peer));
  }
}

Result<Act> MiniMaxM2::run(const StepInput& given, KvCache& cache) {
  const ModelConfig& c = config();
  const int64_t rows = static_cast<int64_t>(given.tokens.size());
  if (rows == 0) return errorf("forward: empty step");
  if (given.positions.size() != given.tokens.size() || given.slots.size() != given.tokens.size())
    return errorf("forward: {} tokens but {} positions and {} slots", rows, given.positions.size(), given.slots.size());
  for (int32_t id : given.tokens) {
    if (id < 0 || id >= c.vocab_size) return errorf("token id {} is outside the vocabulary [0, {})", id, c.vocab_size);
  }
  int64_t covered = 0, max_context = 0;
  bool decode = true;  // one row per sequence
  for (const SeqSlice& s : given.seqs) {
    decode = decode && s.num_rows == 1;
    max_context = std::max(max_context, s.context_len);
    if (s.first_row != covered || s.num_rows <= 0 || s.context_len < s.num_rows ||
        s.context_len > static_cast<int64_t>(s.block_table.size()) * cache.shape().block_size)
      return errorf("forward: inconsistent sequence slice (rows {}+{}, context {}, {} blocks)", s.first_row,
                    s.num_rows, s.context_len, s.block_table.size());
    covered += s.num_rows;
  }
  if (covered != rows) return errorf("forward: sequences cover {} of {} rows", covered, rows);
  for (int64_t r : given.logit_rows) {
    if (r < 0 || r >= rows) return errorf("forward: logit row {} outside [0, {})", r, rows);
  }
  const int top_k = c.num_experts_per_tok;
  const bool forced = !given.forced_experts.empty();
  if (forced) {
    if (static_cast<int64_t>(given.forced_experts.size()) != c.num_hidden_layers * rows * top_k)
      return errorf("forward: {} forced expert ids for {} layers x {} rows x top {}", given.forced_experts.size(),
                    c.num_hidden_layers, rows, top_k);
    if (!backend_.supports_routing_replay())
      return errorf("routing replay is not implemented by the {} backend", backend_.name());
    for (int64_t i = 0; i < rows * c.num_hidden_layers; ++i) {
      const int32_t* ids = given.forced_experts.data() + i * top_k;
      if (ids[0] < 0) continue;
      for (int j = 0; j < top_k; ++j) {
        if (ids[j] < 0 || ids[j] >= c.num_local_experts)
          return errorf("forward: forced expert id {} outside [0, {})", ids[j], c.num_local_experts);
        for (int m = 0; m < j; ++m)
          if (ids[m] == ids[j]) return errorf("forward: forced expert {} given twice for one token", ids[j]);
      }
    }
  }
  if (given.capture_routing) routing_host_.resize(static_cast<size_t>(c.num_hidden_layers * rows * top_k));
  // A rank of a group: its q, k, v are its heads' slices; the shards meet in
  // the communicator (the same collectives, in the same order, on every rank).
  const bool tp = comm_ && comm_->size() > 1;
  if (tp && !backend_.supports_tensor_parallel())
    return errorf("the {} backend does not implement tensor parallelism", backend_.name());

  // A decode step that may be recorded runs at the size the backend records
  // it at: padded with copies of one of its rows (pad_decode_step). A rank's
  // step is recordable when its collectives are ops on the backend's stream
  // (every rank pads alike, so the collectives keep their sizes).
  const bool recordable = decode && !forced && !given.capture_routing && (!tp || comm_->queued_on_stream());
  const StepInput& in = recordable ? pad_decode_step(given) : given;
  const int64_t T = static_cast<int64_t>(in.tokens.size());

  const int64_t H = c.hidden_size;
  const float eps = static_cast<float>(c.rms_norm_eps);
  const RopeParams rope{c.head_dim, c.rotary_dim, c.rope_theta};
  const float attn_scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(c.head_dim)));
  Act x = scratch(kX, T, H);
  Act h = scratch(kH, T, H);
  Act q = scratch(kQ, T, c.q_dim());
  Act k = scratch(kK, T, c.kv_dim());
  Act v = scratch(kV, T, c.kv_dim());
  Act attn = scratch(kAttn, T, c.q_dim());
  Act out = scratch(kOut, T, H);
  Routing routing;
  routing.tokens = T;
  routing.top_k = c.num_experts_per_tok;
  routing.expert_ids = reinterpret_cast<int32_t*>(scratch(kRouteIds, T, routing.top_k).data);
  routing.weights = scratch(kRouteW, T, routing.top_k).data;

  Backend& b = backend_;
  // x += out, h = norm(x): under tp `out` is this rank's partial sum, reduced
  // in the same op (one kernel on the GPU).
  auto add_norm = [&](const Weight& weight) {
    return tp ? b.all_reduce_add_rms_norm(*comm_, x, out, weight, eps, h) : b.add_rms_norm(x, out, weight, eps, h);
  };
  // A pure decode step may be recorded (its shape: its rows, and what the
  // backend derives from the context bound) and replayed; anything else runs
  // op by op.
  Backend::StepArrays arrays{in.tokens, in.positions, in.slots, in.seqs, c.num_attention_heads,
                             c.num_key_value_heads, max_context};
  arrays.head_dim = cache.shape().head_dim, arrays.kv_dtype = cache.shape().dtype;
  uint64_t graph_key = 0;  // none
  if (recordable) {
    arrays.context_bound = static_cast<int64_t>(std::bit_ceil(static_cast<uint64_t>(std::max<int64_t>(max_context, 256))));
    graph_key = static_cast<uint64_t>(T);
  }
  const Backend::GraphMode mode = b.begin_step(graph_key, arrays);
  if (mode != Backend::GraphMode::kReplayed) {
    b.embed(weights_->embed, in.tokens, weights_->embed_first_id, x);
    // A rank's share of the vocabulary (weight_shard.h): the others' rows are its zeros.
    if (tp && weights_->embed.shape[0] < c.vocab_size) comm_->all_reduce_sum(x.data, T * c.hidden_size);
    for (int l = 0; l < c.num_hidden_layers; ++l) {
      const LayerWeights& L = weights_->layers[l];
      // Attention block: x += o_proj(attn(rope(qk_norm(q, k)), v)); the
      // previous block's residual add is fused into this block's norm. Each
      // producer's copy of its output (ActCopy) goes to the products that
      // read that output next.
      const ActCopy hc = l == 0 ? b.rms_norm(x, L.input_norm, eps, h) : add_norm(L.input_norm);
      b.qkv_proj(h, L.q_proj, L.k_proj, L.v_proj, q, k, v, hc);
      if (tp && c.use_qk_norm) {
        // Full-width QK norm over all ranks' heads (m2-spec §2.2c): the
        // per-row sums of squares [T, 2] summed over the ranks, over
        // q_dim·tp and kv_dim·tp elements (kv heads replicated r times count
        // r times in both the sum and the count).
        Act ss = scratch(kSumSq, T, 2);
        b.qk_sum_squares(q, k, ss);
        comm_->all_reduce_sum(ss.data, T * 2);
        const double ranks = comm_->size();
        b.qk_norm_rope_sums(q, k, ss, c.q_dim() * ranks, c.kv_dim() * ranks, L.q_norm, L.k_norm, eps,
                            in.positions, rope);
        b.kv_store(cache, l, k, v, in.slots);
      } else {
        b.qk_norm_rope_store(q, k, v, L.q_norm, L.k_norm, eps, in.positions, rope, cache, l, in.slots);
      }
      const ActCopy ac = b.attention(q, cache, l, in.seqs, c.num_attention_heads, attn_scale, attn);
      b.matmul(attn, L.o_proj, out, ac);
      // MoE block: x += Σ_k w_k expert_k(post_norm(x)).
      const ActCopy mc = add_norm(L.post_attention_norm);
      const float scaling = static_cast<float>(c.routed_scaling_factor);
      if (forced) {
        const std::span<const int32_t> layer_ids(in.forced_experts.data() + l * T * top_k,
                                                 static_cast<size_t>(T * top_k));
        b.route_forced(h, L.router, L.router_bias, top_k, scaling, layer_ids, routing);
      } else {
        b.route(h, L.router, L.router_bias, top_k, scaling, routing);
      }
      if (in.capture_routing)
        b.copy_to_host(routing.expert_ids, routing_host_.data() + l * T * top_k, T * top_k * sizeof(int32_t));
      b.moe(h, L, routing, out, mc);  // (under tp: this rank's experts or expert columns, a partial sum)
    }
    if (tp) comm_->all_reduce_sum(out.data, T * H);
    b.add(x, out);
    if (mode == Backend::GraphMode::kCapturing) b.end_graph();
  }

  const int64_t R = static_cast<int64_t>(in.logit_rows.size());
  // A rank's lm_head is a slice of the vocabulary (weight_shard.h) or, when
  // tp does not divide it, all of it: then rank 0 alone computes the logits.
  const int64_t V = c.vocab_size, part = weights_->lm_head.out_features();
  if (R == 0 || (tp && part == V && comm_->rank() != 0)) return Act{nullptr, 0, V};
  Act sel = scratch(kSel, R, H);
  b.gather_rows(x, in.logit_rows, sel);
  const ActCopy sc = b.rms_norm(sel, weights_->final_norm, eps, sel);
  Act lg = scratch(kLogits, R, V);
  if (part == V) {
    b.matmul(sel, weights_->lm_head, lg, sc);
    return lg;
  }
  // Vocabulary-parallel: this rank's [R, V/tp] columns, then each row
  // gathered from every rank's slice into the full [R, V] (rank order = vocab order).
  Act mine = scratch(kLogitsPart, R, part);
  b.matmul(sel, weights_->lm_head, mine, sc);
  for (int64_t i = 0; i < R; ++i) comm_->all_gather(mine.data + i * part, part, lg.data + i * V);
  return lg;
}

}  // namespace m2
