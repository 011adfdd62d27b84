// prepare_weights for the CUDA backend: every tensor goes to device memory in
// its stored dtype, straight from its host view (the memory-mapped checkpoint
// or the dummy buffers), so no second host copy is ever made. The device
// memory is laid out first (below), queueing one copy per view; the copies
// then stream out of the checkpoint shard by shard (model/weight_stream.h),
// which reads ahead only what is about to be copied and drops the host pages
// of what has been, so a checkpoint larger than host memory loads. Layout:
//   - norms, embeddings, router gate and bias: one allocation each;
//   - dense linears: the weight, then (FP8) its fp32 scales at the next
//     256-byte boundary; a layer's q, k and v stacked in one allocation
//     where their shapes allow (decode streams them in one pass);
//   - experts: each layer's w1, w3 and w2 stacked expert after expert
//     (DeviceExperts), so the MoE kernels address expert e by stride.
// Each weight's handle (Weight::prepared, Linear::prepared,
// LayerWeights::prepared_experts) points at this backend's record of its
// copy (device_types.h: PreparedTensor, PreparedExperts), which the ops read
// directly. A weight whose handle is not this backend's (fresh, or another
// backend's) is uploaded; one host tensor under two names (tied embeddings)
// gets one copy. After a failed prepare_weights the device copies are
// incomplete: the caller stops.
#include <algorithm>
#include <set>
#include <tuple>

#include "backend/cuda/runtime/backend_impl.h"
#include "backend/cuda/runtime/check.h"
#include "backend/cuda/runtime/dummy_fill.h"
#include "model/weight_stream.h"
#include "util/log.h"

namespace m2::cuda {
namespace {

size_t bytes_of(const TensorView& t) { return t.empty() ? 0 : t.nbytes(); }

// Bytes one Linear takes on the device (weight, then scales).
size_t linear_bytes(const Linear& l) {
  return l.is_fp8() ? align256(bytes_of(l.weight)) + align256(bytes_of(l.scale_inv)) : bytes_of(l.weight);
}

Status check_fp8_blocks(const Linear& l, const char* what) {
  if (l.is_fp8() && (l.block_rows != kFp8Block || l.block_cols != kFp8Block))
    return errorf("{}: FP8 blocks of {} x {}; the CUDA kernels need {} x {}", what, l.block_rows, l.block_cols,
                  kFp8Block, kFp8Block);
  return Status();
}

}  // namespace

Status CudaBackend::device_alloc(size_t bytes, const char* what, uint8_t** out) {
  void* p = nullptr;
  const cudaError_t e = cudaMalloc(&p, std::max<size_t>(bytes, 1));
  if (e != cudaSuccess) {
    cudaGetLastError();  // cudaMalloc errors are not sticky: clear it
    size_t free_b = 0, total_b = 0;
    cudaMemGetInfo(&free_b, &total_b);
    return errorf("{}: cudaMalloc of {:.2f} MiB failed ({}); device {} has {:.2f} of {:.2f} GiB free", what,
                  bytes / 1048576.0, cudaGetErrorString(e), device_, free_b / 1073741824.0, total_b / 1073741824.0);
  }
  weight_memory_.push_back(p);
  weight_bytes_ += std::max<size_t>(bytes, 1);
  *out = static_cast<uint8_t*>(p);
  return Status();
}

void CudaBackend::queue_copy(void* dst, const TensorView& src, std::string_view what) {
  pending_copies_.push_back({src.data, src.nbytes(), dst, std::string(what)});
}

void CudaBackend::queue_copy(void* dst, const Linear& l, std::string_view what) {
  if (l.contiguous()) return queue_copy(dst, l.weight, what);
  // A column slice's rows, packed on the device (WeightCopy's strided form).
  const uint64_t esz = dtype_size(l.weight.dtype);
  pending_copies_.push_back({l.weight.data, l.weight.nbytes(), dst, std::string(what),
                             static_cast<uint64_t>(l.in_features()) * esz, static_cast<uint64_t>(l.ld()) * esz});
}

bool CudaBackend::owns(Prepared p) const {
  // Both record types start with their owner.
  return p && static_cast<const PreparedTensor*>(p)->owner == this;
}

const PreparedTensor* CudaBackend::record(const DeviceWeight& w) {
  PreparedTensor& r = tensors_.emplace_back();
  r.owner = this;
  r.weight = w;
  if (w.scales) has_fp8_weights_ = true;
  return &r;
}

Status CudaBackend::upload_view(Weight& t, const char* what, Uploads& uploads) {
  if (t.empty() || owns(t.prepared)) return Status();
  if (auto it = uploads.find(t.data); it != uploads.end()) {
    t.prepared = it->second;
    return Status();
  }
  uint8_t* dev = nullptr;
  M2_RETURN_IF_ERROR(device_alloc(t.nbytes(), what, &dev));
  queue_copy(dev, t, what);
  DeviceWeight d;
  d.data = dev, d.dtype = t.dtype, d.rows = t.shape.ndim > 0 ? t.shape[0] : 1;
  d.cols = t.shape.ndim > 1 ? t.shape[1] : 1;
  t.prepared = uploads[t.data] = record(d);
  return Status();
}

Status CudaBackend::upload_linear(Linear& l, const char* what, Uploads& uploads) {
  if (l.weight.empty() || owns(l.prepared)) return Status();  // none, or already ours
  M2_RETURN_IF_ERROR(check_fp8_blocks(l, what));
  if (auto it = uploads.find(l.weight.data); it != uploads.end() && !l.is_fp8()) {  // the tied lm_head
    l.prepared = it->second;
    return Status();
  }
  uint8_t* dev = nullptr;
  M2_RETURN_IF_ERROR(device_alloc(linear_bytes(l), what, &dev));
  queue_copy(dev, l, what);
  DeviceWeight d;
  d.data = dev, d.dtype = l.weight.dtype, d.rows = l.out_features(), d.cols = l.in_features();
  if (l.is_fp8()) {
    uint8_t* scales = dev + align256(l.weight.nbytes());
    queue_copy(scales, l.scale_inv, what);
    d.scales = reinterpret_cast<const float*>(scales), d.scale_ld = l.scale_inv.shape[1];
  }
  l.prepared = uploads[l.weight.data] = record(d);
  return Status();
}

Status CudaBackend::upload_qkv(LayerWeights& layer, const char* what, Uploads& uploads, bool* fused) {
  *fused = false;
  Linear* ls[3] = {&layer.q_proj, &layer.k_proj, &layer.v_proj};
  const Linear& q = *ls[0];
  for (const Linear* l : ls) {
    if (l->weight.empty() || owns(l->prepared) || uploads.count(l->weight.data)) return Status();
    if (l->weight.dtype != q.weight.dtype || l->in_features() != q.in_features()) return Status();
    if (l->is_fp8() && (l->out_features() % kFp8Block != 0 || l->scale_inv.shape.ndim != 2 ||
                        l->scale_inv.shape[1] != q.scale_inv.shape[1]))
      return Status();
  }
  if (q.weight.dtype != DType::kF8E4M3 && q.weight.dtype != DType::kBF16) return Status();
  for (const Linear* l : ls) M2_RETURN_IF_ERROR(check_fp8_blocks(*l, what));
  // [q rows | k rows | v rows], then (FP8) their scales in the same order:
  // one matrix of q+k+v rows whose 128-row scale blocks follow one another.
  size_t data = 0, scales = 0;
  for (const Linear* l : ls) data += bytes_of(l->weight), scales += q.is_fp8() ? bytes_of(l->scale_inv) : 0;
  uint8_t* base = nullptr;
  M2_RETURN_IF_ERROR(device_alloc(align256(data) + scales, what, &base));
  uint8_t* scale_base = q.is_fp8() ? base + align256(data) : nullptr;
  size_t d_off = 0, s_off = 0;
  int64_t rows = 0;
  DeviceWeight& stack = stacks_.emplace_back();
  for (Linear* l : ls) {
    DeviceWeight d;
    d.data = base + d_off, d.dtype = l->weight.dtype, d.rows = l->out_features(), d.cols = l->in_features();
    queue_copy(base + d_off, *l, what);
    if (l->is_fp8()) {
      queue_copy(scale_base + s_off, l->scale_inv, what);
      d.scales = reinterpret_cast<const float*>(scale_base + s_off), d.scale_ld = l->scale_inv.shape[1];
      s_off += bytes_of(l->scale_inv);
    }
    l->prepared = uploads[l->weight.data] = record(d);
    d_off += bytes_of(l->weight);
    rows += l->out_features();
  }
  stack.data = base, stack.scales = reinterpret_cast<const float*>(scale_base), stack.dtype = q.weight.dtype;
  stack.rows = rows, stack.cols = q.in_features(), stack.scale_ld = q.is_fp8() ? q.scale_inv.shape[1] : 0;
  const_cast<PreparedTensor*>(static_cast<const PreparedTensor*>(layer.q_proj.prepared))->qkv = &stack;
  *fused = true;
  return Status();
}

Status CudaBackend::upload_experts(LayerWeights& layer, int index, bool on_host) {
  if (layer.experts.empty() || owns(layer.prepared_experts)) return Status();
  const std::string what = fmt::format("layer {} experts", index);
  // The experts held: all, or under expert parallelism one contiguous run
  // (weight_shard.h: the other ranks' stay empty); stacked from 0.
  const int64_t E = static_cast<int64_t>(layer.experts.size());
  int64_t first = 0, end = E;
  while (first < E && layer.experts[first].w1.weight.empty()) ++first;
  while (end > first && layer.experts[end - 1].w1.weight.empty()) --end;
  if (first == end) return errorf("{}: none of the {} experts is held", what, E);
  for (int64_t i = first; i < end; ++i)
    if (layer.experts[i].w1.weight.empty())
      return errorf("{}: the experts held are not one contiguous run (expert {} of {}..{} is empty)", what, i, first,
                    end - 1);
  if (on_host && end - first < E)
    return errorf("{}: experts in host memory (--cpu-moe, --n-cpu-moe) with expert parallelism: not supported", what);
  const std::span<ExpertWeights> held(layer.experts.data() + first, static_cast<size_t>(end - first));
  const ExpertWeights& e0 = held[0];
  for (const ExpertWeights& e : held) {
    for (const Linear* l : {&e.w1, &e.w3, &e.w2}) {
      const Linear& ref = l == &e.w2 ? e0.w2 : e0.w1;
      if (l->weight.dtype != ref.weight.dtype || l->weight.shape != ref.weight.shape)
        return errorf("{}: experts differ in dtype or shape ({} {} vs {} {})", what, dtype_name(l->weight.dtype),
                      l->weight.shape.str(), dtype_name(ref.weight.dtype), ref.weight.shape.str());
      M2_RETURN_IF_ERROR(check_fp8_blocks(*l, what.c_str()));
    }
  }
  // The MoE kernels read expert rows in 16-byte vectors (gemv_compatible).
  for (const Linear* l : {&e0.w1, &e0.w2}) {
    const int64_t cols = l->weight.shape[1], bytes = cols * static_cast<int64_t>(dtype_size(l->weight.dtype));
    if (bytes % 16 != 0)
      return errorf("{}: {} rows of {} {} elements ({} bytes): the GPU's MoE kernels need rows of a multiple of 16 "
                    "bytes",
                    what, l == &e0.w1 ? "w1/w3" : "w2", cols, dtype_name(l->weight.dtype), bytes);
  }
  DeviceExperts d;
  d.dtype = e0.w1.weight.dtype;
  d.num_experts = end - first;
  d.first_expert = first;
  d.router_experts = E;
  d.intermediate = e0.w1.out_features();
  d.hidden = e0.w1.in_features();
  d.scale_off13 = static_cast<int64_t>(align256(e0.w1.weight.nbytes()));
  d.stride13 = static_cast<int64_t>(align256(linear_bytes(e0.w1)));
  d.scale_off2 = static_cast<int64_t>(align256(e0.w2.weight.nbytes()));
  d.stride2 = static_cast<int64_t>(align256(linear_bytes(e0.w2)));
  uint8_t *w1 = nullptr, *w3 = nullptr, *w2 = nullptr;
  const HostExperts* host = nullptr;
  if (on_host) {  // pinned host memory in the same layout (the copies below land there)
    M2_ASSIGN_OR_RETURN(HostExperts * h, host_experts_->allocate(index, d));
    w1 = const_cast<uint8_t*>(h->pinned.w1), w3 = const_cast<uint8_t*>(h->pinned.w3);
    w2 = const_cast<uint8_t*>(h->pinned.w2);
    host = h;
  } else {
    M2_RETURN_IF_ERROR(device_alloc(d.stride13 * d.num_experts, what.c_str(), &w1));
    M2_RETURN_IF_ERROR(device_alloc(d.stride13 * d.num_experts, what.c_str(), &w3));
    M2_RETURN_IF_ERROR(device_alloc(d.stride2 * d.num_experts, what.c_str(), &w2));
  }
  d.w1 = w1, d.w3 = w3, d.w2 = w2;
  for (int64_t i = 0; i < d.num_experts; ++i) {
    ExpertWeights& e = held[i];
    const std::tuple<Linear*, uint8_t*, int64_t> parts[] = {
        {&e.w1, w1 + i * d.stride13, d.scale_off13}, {&e.w3, w3 + i * d.stride13, d.scale_off13},
        {&e.w2, w2 + i * d.stride2, d.scale_off2}};
    for (auto [l, dst, scale_off] : parts) {
      // Each expert matrix gets its record too (a product over one expert, tests).
      DeviceWeight m;
      m.data = dst, m.dtype = l->weight.dtype, m.rows = l->out_features(), m.cols = l->in_features();
      queue_copy(dst, *l, what);
      if (l->is_fp8()) {
        queue_copy(dst + scale_off, l->scale_inv, what);
        m.scales = reinterpret_cast<const float*>(dst + scale_off), m.scale_ld = l->scale_inv.shape[1];
      }
      l->prepared = record(m);
    }
  }
  PreparedExperts& r = experts_.emplace_back();
  r.owner = this;
  r.experts = d;
  r.host = host;
  layer.prepared_experts = &r;
  return Status();
}

Status CudaBackend::prepare_weights(ModelWeights& w) {
  if (cudaSetDevice(device_) != cudaSuccess) return errorf("prepare_weights: cannot select CUDA device {}", device_);
  // What is still to upload (with the device alignment), for the fit check.
  std::set<const void*> seen;
  size_t total = 0;
  auto count = [&](const TensorView& t, Prepared p, size_t bytes) {
    if (!t.empty() && !owns(p) && seen.insert(t.data).second) total += bytes;
  };
  auto count_view = [&](const Weight& t) { count(t, t.prepared, bytes_of(t)); };
  auto count_linear = [&](const Linear& l) { count(l.weight, l.prepared, linear_bytes(l)); };
  count_view(w.embed);
  count_view(w.final_norm);
  count_linear(w.lm_head);
  for (const LayerWeights& L : w.layers) {
    for (const Weight* t : {&L.input_norm, &L.post_attention_norm, &L.q_norm, &L.k_norm, &L.router, &L.router_bias})
      count_view(*t);
    for (const Linear* l : {&L.q_proj, &L.k_proj, &L.v_proj, &L.o_proj}) count_linear(*l);
  }
  size_t free_b = 0, total_b = 0;
  if (cudaMemGetInfo(&free_b, &total_b) != cudaSuccess) return errorf("prepare_weights: cudaMemGetInfo failed");
  // The leading layers whose experts stay in host memory (--n-cpu-moe).
  M2_ASSIGN_OR_RETURN(const int host_layers, host_expert_layers(w, free_b, total_b));
  size_t host_total = 0, layer_max = 0;
  for (size_t i = 0; i < w.layers.size(); ++i) {
    const LayerWeights& L = w.layers[i];
    if (L.experts.empty() || owns(L.prepared_experts)) continue;
    size_t layer_bytes = 0;
    for (const ExpertWeights& e : L.experts) layer_bytes += align256(linear_bytes(e.w1)) * 2 + align256(linear_bytes(e.w2));
    (static_cast<int>(i) < host_layers ? host_total : total) += layer_bytes;
    layer_max = std::max(layer_max, layer_bytes);
  }
  if (host_total > 0 && !host_experts_) total += 2 * layer_max;  // the device staging of the host layers
  if (total > free_b)
    return errorf("the weights need {:.2f} GiB but CUDA device {} has {:.2f} of {:.2f} GiB free (fewer layers: "
                  "--num-layers; experts in host memory: --n-cpu-moe)",
                  total / 1073741824.0, device_, free_b / 1073741824.0, total_b / 1073741824.0);
  if (host_total > 0 && options_.batch_invariant)  // the CPU's W8A32 experts for small steps, the GPU's W8A8 above
    return errorf("--batch-invariant with experts in host memory (--cpu-moe, --n-cpu-moe) is not supported: a host "
                  "layer's numerics change with the step's size (CPU up to --cpu-moe-max-tokens, GPU above)");
  if (host_total > 0) {
    const int64_t avail = host_available_bytes();
    constexpr int64_t kHostMargin = 4ll << 30;  // for the process, the page cache of the shards being read
    if (static_cast<int64_t>(host_total) + kHostMargin > avail)
      return errorf("{}: the experts of {} layers need {:.2f} GiB of pinned host memory (+{:.0f} GiB "
                    "margin) and the host has {:.2f} GiB available; the GPU would hold {:.2f} GiB (fewer host layers, "
                    "a smaller KV cache or more of the GPU for --n-cpu-moe auto, or fewer layers: --num-layers)",
                    options_.cpu_moe_layers == CudaOptions::kCpuMoeAuto  ? std::string("--n-cpu-moe auto")
                    : options_.cpu_moe_layers == CudaOptions::kCpuMoeAll ? std::string("--cpu-moe")
                                                                          : fmt::format("--n-cpu-moe {}", host_layers),
                    host_layers, host_total / 1073741824.0, kHostMargin / 1073741824.0,
                    avail / 1073741824.0, total / 1073741824.0);
    if (!host_experts_)
      host_experts_ = std::make_unique<HostExpertRuntime>(device_, options_.cpu_moe_max_tokens, options_.cpu_moe_threads);
    host_expert_layers_ = host_layers;
    log_info("experts of layers 0-{} in pinned host memory ({:.2f} GiB, computed by {} CPU threads up to {} tokens a "
             "step, streamed to the GPU above); {:.2f} GiB of weights on GPU {}",
             host_layers - 1, host_total / 1073741824.0, host_experts_->threads(), options_.cpu_moe_max_tokens,
             total / 1073741824.0, device_);
  }
  pending_copies_.clear();
  Uploads uploads;  // host tensor -> its record, for one tensor under two names
  M2_RETURN_IF_ERROR(upload_view(w.embed, "embed_tokens", uploads));
  M2_RETURN_IF_ERROR(upload_view(w.final_norm, "norm", uploads));
  M2_RETURN_IF_ERROR(upload_linear(w.lm_head, "lm_head", uploads));
  for (size_t i = 0; i < w.layers.size(); ++i) {
    LayerWeights& L = w.layers[i];
    M2_RETURN_IF_ERROR(upload_view(L.input_norm, "input_layernorm", uploads));
    M2_RETURN_IF_ERROR(upload_view(L.post_attention_norm, "post_attention_layernorm", uploads));
    M2_RETURN_IF_ERROR(upload_view(L.q_norm, "q_norm", uploads));
    M2_RETURN_IF_ERROR(upload_view(L.k_norm, "k_norm", uploads));
    M2_RETURN_IF_ERROR(upload_view(L.router, "gate", uploads));
    M2_RETURN_IF_ERROR(upload_view(L.router_bias, "e_score_correction_bias", uploads));
    bool fused = false;
    M2_RETURN_IF_ERROR(upload_qkv(L, "q_proj|k_proj|v_proj", uploads, &fused));
    if (!fused) {
      M2_RETURN_IF_ERROR(upload_linear(L.q_proj, "q_proj", uploads));
      M2_RETURN_IF_ERROR(upload_linear(L.k_proj, "k_proj", uploads));
      M2_RETURN_IF_ERROR(upload_linear(L.v_proj, "v_proj", uploads));
    }
    M2_RETURN_IF_ERROR(upload_linear(L.o_proj, "o_proj", uploads));
    M2_RETURN_IF_ERROR(upload_experts(L, static_cast<int>(i), static_cast<int>(i) < host_layers));
  }
  WeightStreamOptions options;
  options.label = fmt::format("weights -> GPU {}", device_);
  options.progress = ProgressBar::for_stderr(ProgressBar::Style::kLog);
  std::vector<WeightCopy> copies;
  copies.swap(pending_copies_);
  // Dummy FP8 weights (ModelWeights::dummy_fp8) are generated here instead:
  // a copy's source is a placeholder address, the offset into it the first
  // element (copies come in pieces).
  const DummyFp8Table table = dummy_fp8_table();
  auto dummy_of = [&](const void* src) -> std::pair<const ModelWeights::DummyFp8*, int64_t> {
    auto it = w.dummy_fp8.upper_bound(src);
    if (it == w.dummy_fp8.begin()) return {nullptr, 0};
    --it;
    const int64_t off = static_cast<const uint8_t*>(src) - static_cast<const uint8_t*>(it->first);
    return off < it->second.elements ? std::pair{&it->second, off} : std::pair{nullptr, int64_t{0}};
  };
  M2_RETURN_IF_ERROR(stream_weights(
      w.checkpoint.get(), copies,
      [&](const WeightCopy& c) {
        if (auto [d, first] = dummy_of(c.src); d) {
          const cudaError_t e = launch_fill_dummy_fp8(static_cast<uint8_t*>(c.dst), first,
                                                      static_cast<int64_t>(c.bytes), d->seed, table, stream_,
                                                      d->full_cols, d->col_begin, d->cols);
          if (e == cudaSuccess) return Status();
          return errorf("{}: generating {} dummy FP8 bytes failed: {}", c.what, c.bytes, cudaGetErrorString(e));
        }
        // (cudaMemcpyDefault: the destination may be pinned host memory.)
        const cudaError_t e =
            c.strided() ? cudaMemcpy2D(c.dst, c.row_bytes, c.src, c.src_pitch, c.row_bytes, c.bytes / c.row_bytes,
                                       cudaMemcpyDefault)
                        : cudaMemcpy(c.dst, c.src, c.bytes, cudaMemcpyDefault);
        if (e == cudaSuccess) return Status();
        return errorf("{}: upload of {} bytes failed: {}", c.what, c.bytes, cudaGetErrorString(e));
      },
      options));
  const cudaError_t e = cudaStreamSynchronize(stream_);
  if (e != cudaSuccess) return errorf("prepare_weights: generating the dummy FP8 weights failed: {}", cudaGetErrorString(e));
  return Status();
}

Status CudaBackend::update_weights(const ModelWeights& served, ModelWeights& next) {
  if (served.layers.size() != next.layers.size())
    return errorf("update_weights: {} layers served, {} in the update", served.layers.size(), next.layers.size());
  bind_device();
  // Two passes over the pairs (served, next): the first only checks, so that
  // a refused update leaves every copy as it was; the second lists the
  // changed bytes' copies over served's device copies (then streamed from
  // next's checkpoint in file order, as a load is) and gives next served's handles.
  bool copying = false;
  std::vector<WeightCopy> copies;
  auto copy = [&](const void* dst, const TensorView& from, const TensorView& was, const char* what) -> Status {
    if (from.data == was.data || from.empty()) return Status();
    if (!copying) {
      if (from.dtype != was.dtype || from.shape != was.shape)
        return errorf("update_weights: {} is {} {}, served {} {}", what, dtype_name(from.dtype), from.shape.str(),
                      dtype_name(was.dtype), was.shape.str());
      return Status();
    }
    copies.push_back({from.data, static_cast<uint64_t>(from.nbytes()), const_cast<void*>(dst), what});
    return Status();
  };
  auto record_of = [&](Prepared p, const char* what) -> Result<const PreparedTensor*> {
    if (!owns(p)) return errorf("update_weights: the served {} was not prepared by this backend", what);
    return static_cast<const PreparedTensor*>(p);
  };
  auto weight = [&](const Weight& was, Weight& to, const char* what) -> Status {
    if (was.empty()) return Status();
    M2_ASSIGN_OR_RETURN(const PreparedTensor* r, record_of(was.prepared, what));
    M2_RETURN_IF_ERROR(copy(r->weight.data, to, was, what));
    if (copying) to.prepared = was.prepared;
    return Status();
  };
  auto linear = [&](const Linear& was, Linear& to, const char* what) -> Status {
    if (was.weight.empty()) return Status();
    if (!was.contiguous() || !to.contiguous())
      return errorf("update_weights: {} is a tensor-parallel column slice; updates of a shard are not supported", what);
    M2_ASSIGN_OR_RETURN(const PreparedTensor* r, record_of(was.prepared, what));
    M2_RETURN_IF_ERROR(copy(r->weight.data, to.weight, was.weight, what));
    if (was.is_fp8()) M2_RETURN_IF_ERROR(copy(r->weight.scales, to.scale_inv, was.scale_inv, what));
    if (copying) to.prepared = was.prepared;
    return Status();
  };
  for (int pass = 0; pass < 2; ++pass) {
    copying = pass == 1;
    M2_RETURN_IF_ERROR(weight(served.embed, next.embed, "embed_tokens"));
    M2_RETURN_IF_ERROR(weight(served.final_norm, next.final_norm, "norm"));
    M2_RETURN_IF_ERROR(linear(served.lm_head, next.lm_head, "lm_head"));
    for (size_t i = 0; i < served.layers.size(); ++i) {
      const LayerWeights& a = served.layers[i];
      LayerWeights& b = next.layers[i];
      if (a.experts.size() != b.experts.size()) return errorf("update_weights: layer {}: another expert count", i);
      M2_RETURN_IF_ERROR(weight(a.input_norm, b.input_norm, "input_layernorm"));
      M2_RETURN_IF_ERROR(weight(a.post_attention_norm, b.post_attention_norm, "post_attention_layernorm"));
      M2_RETURN_IF_ERROR(weight(a.q_norm, b.q_norm, "q_norm"));
      M2_RETURN_IF_ERROR(weight(a.k_norm, b.k_norm, "k_norm"));
      M2_RETURN_IF_ERROR(weight(a.router, b.router, "gate"));
      M2_RETURN_IF_ERROR(weight(a.router_bias, b.router_bias, "e_score_correction_bias"));
      M2_RETURN_IF_ERROR(linear(a.q_proj, b.q_proj, "q_proj"));
      M2_RETURN_IF_ERROR(linear(a.k_proj, b.k_proj, "k_proj"));
      M2_RETURN_IF_ERROR(linear(a.v_proj, b.v_proj, "v_proj"));
      M2_RETURN_IF_ERROR(linear(a.o_proj, b.o_proj, "o_proj"));
      for (size_t e = 0; e < a.experts.size(); ++e) {
        M2_RETURN_IF_ERROR(linear(a.experts[e].w1, b.experts[e].w1, "experts.w1"));
        M2_RETURN_IF_ERROR(linear(a.experts[e].w3, b.experts[e].w3, "experts.w3"));
        M2_RETURN_IF_ERROR(linear(a.experts[e].w2, b.experts[e].w2, "experts.w2"));
      }
      if (copying) b.prepared_experts = a.prepared_experts;
    }
  }
  // (The steps before are done: the copies below are synchronous, as a load's.)
  cudaError_t e = cudaStreamSynchronize(stream_);
  if (e != cudaSuccess) return errorf("update_weights: the step before failed: {}", cudaGetErrorString(e));
  uint64_t bytes = 0;
  for (const WeightCopy& c : copies) bytes += c.bytes;
  WeightStreamOptions options;
  options.label = fmt::format("weight update -> GPU {} ({} tensors)", device_, copies.size());
  // (cudaMemcpyDefault: a host layer's experts are pinned host memory.)
  M2_RETURN_IF_ERROR(stream_weights(
      next.checkpoint.get(), copies,
      [](const WeightCopy& c) {
        const cudaError_t err = cudaMemcpy(c.dst, c.src, c.bytes, cudaMemcpyDefault);
        if (err == cudaSuccess) return Status();
        return errorf("update_weights: copying {} ({} bytes) failed: {}", c.what, c.bytes, cudaGetErrorString(err));
      },
      options));
  if (host_experts_) host_experts_->invalidate_staging();  // the staged copies may be of the old experts
  log_debug("update_weights: {} tensors, {:.1f} MiB written in place", copies.size(), bytes / 1048576.0);
  return Status();
}

const PreparedTensor& CudaBackend::prepared(Prepared p, const TensorView& t, const char* op, const char* what) const {
  if (!owns(p)) {
    log_error("{}: {} {} {} was not uploaded by this backend's prepare_weights", op, what, dtype_name(t.dtype),
              t.shape.str());
    std::abort();
  }
  return *static_cast<const PreparedTensor*>(p);
}

const void* CudaBackend::device_view(const Weight& t, const char* op) const {
  if (t.empty()) return nullptr;
  return prepared(t.prepared, t, op, "tensor").weight.data;
}

const DeviceWeight& CudaBackend::device_weight(const Linear& l, const char* op) const {
  return prepared(l.prepared, l.weight, op, "linear").weight;
}


}  // namespace m2::cuda
