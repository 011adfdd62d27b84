// prepare_weights for the CUDA backend: every tensor goes to device memory in
// its stored dtype, straight from its host view (the memory-mapped checkpoint
// or the dummy buffers), so no second host copy is ever made. The device
// memory is laid out first (below), queueing one copy per view; the copies
// then stream out of the checkpoint shard by shard (model/weight_stream.h),
// which reads ahead only what is about to be copied and drops the host pages
// of what has been, so a checkpoint larger than host memory loads. Layout:
//   - norms, embeddings, router gate and bias: one allocation each, found by
//     the host view's data pointer;
//   - dense linears: the weight, then (FP8) its fp32 scales at the next
//     256-byte boundary, found through Linear::device;
//   - experts: each layer's w1, w3 and w2 stacked expert after expert
//     (DeviceExperts, found through expert 0's w1.device), so the MoE kernels
//     address expert e by stride.
// A Linear whose `device` this backend did not set (fresh, or set by another
// backend) is uploaded; views are found by host address, so host tensors
// must stay where they are while the backend uses their copies. After a
// failed prepare_weights the device copies are incomplete: the caller stops.
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
  *out = static_cast<uint8_t*>(p);
  return Status();
}

void CudaBackend::queue_copy(void* dst, const TensorView& src, std::string_view what) {
  pending_copies_.push_back({src.data, src.nbytes(), dst, std::string(what)});
}

Status CudaBackend::upload_view(const TensorView& t, const char* what) {
  if (t.empty() || views_.count(t.data)) return Status();
  uint8_t* dev = nullptr;
  M2_RETURN_IF_ERROR(device_alloc(t.nbytes(), what, &dev));
  queue_copy(dev, t, what);
  views_[t.data] = dev;
  return Status();
}

Status CudaBackend::upload_linear(Linear& l, const char* what) {
  if (l.weight.empty() || linears_.count(l.device)) return Status();  // none, or already ours
  M2_RETURN_IF_ERROR(check_fp8_blocks(l, what));
  auto it = views_.find(l.weight.data);  // a dense tensor already up (the tied lm_head)
  if (it != views_.end() && !l.is_fp8()) {
    l.device = const_cast<void*>(it->second);
    linears_.insert(l.device);
    return Status();
  }
  uint8_t* dev = nullptr;
  M2_RETURN_IF_ERROR(device_alloc(linear_bytes(l), what, &dev));
  queue_copy(dev, l.weight, what);
  if (l.is_fp8()) {
    uint8_t* scales = dev + align256(l.weight.nbytes());
    queue_copy(scales, l.scale_inv, what);
    scales_[dev] = reinterpret_cast<const float*>(scales);
  }
  views_[l.weight.data] = dev;
  l.device = dev;
  linears_.insert(dev);
  return Status();
}

Status CudaBackend::upload_qkv(LayerWeights& layer, const char* what, bool* fused) {
  *fused = false;
  Linear* ls[3] = {&layer.q_proj, &layer.k_proj, &layer.v_proj};
  const Linear& q = *ls[0];
  for (const Linear* l : ls) {
    if (l->weight.empty() || linears_.count(l->device) || views_.count(l->weight.data)) return Status();
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
  for (Linear* l : ls) {
    uint8_t* dev = base + d_off;
    queue_copy(dev, l->weight, what);
    if (l->is_fp8()) {
      queue_copy(scale_base + s_off, l->scale_inv, what);
      scales_[dev] = reinterpret_cast<const float*>(scale_base + s_off);
      s_off += bytes_of(l->scale_inv);
    }
    views_[l->weight.data] = dev;
    l->device = dev;
    linears_.insert(dev);
    d_off += bytes_of(l->weight);
    rows += l->out_features();
  }
  DeviceWeight w;
  w.data = base, w.scales = reinterpret_cast<const float*>(scale_base), w.dtype = q.weight.dtype;
  w.rows = rows, w.cols = q.in_features(), w.scale_ld = q.is_fp8() ? q.scale_inv.shape[1] : 0;
  qkv_[base] = w;
  *fused = true;
  return Status();
}

Status CudaBackend::upload_experts(LayerWeights& layer, int index) {
  if (layer.experts.empty() || experts_.count(layer.experts[0].w1.device)) return Status();
  const ExpertWeights& e0 = layer.experts[0];
  const std::string what = fmt::format("layer {} experts", index);
  for (const ExpertWeights& e : layer.experts) {
    for (const Linear* l : {&e.w1, &e.w3, &e.w2}) {
      const Linear& ref = l == &e.w2 ? e0.w2 : e0.w1;
      if (l->weight.dtype != ref.weight.dtype || l->weight.shape != ref.weight.shape)
        return errorf("{}: experts differ in dtype or shape ({} {} vs {} {})", what, dtype_name(l->weight.dtype),
                      l->weight.shape.str(), dtype_name(ref.weight.dtype), ref.weight.shape.str());
      M2_RETURN_IF_ERROR(check_fp8_blocks(*l, what.c_str()));
    }
  }
  DeviceExperts d;
  d.dtype = e0.w1.weight.dtype;
  d.num_experts = static_cast<int64_t>(layer.experts.size());
  d.intermediate = e0.w1.out_features();
  d.hidden = e0.w1.in_features();
  d.scale_off13 = static_cast<int64_t>(align256(e0.w1.weight.nbytes()));
  d.stride13 = static_cast<int64_t>(align256(linear_bytes(e0.w1)));
  d.scale_off2 = static_cast<int64_t>(align256(e0.w2.weight.nbytes()));
  d.stride2 = static_cast<int64_t>(align256(linear_bytes(e0.w2)));
  uint8_t *w1 = nullptr, *w3 = nullptr, *w2 = nullptr;
  M2_RETURN_IF_ERROR(device_alloc(d.stride13 * d.num_experts, what.c_str(), &w1));
  M2_RETURN_IF_ERROR(device_alloc(d.stride13 * d.num_experts, what.c_str(), &w3));
  M2_RETURN_IF_ERROR(device_alloc(d.stride2 * d.num_experts, what.c_str(), &w2));
  d.w1 = w1, d.w3 = w3, d.w2 = w2;
  for (int64_t i = 0; i < d.num_experts; ++i) {
    ExpertWeights& e = layer.experts[i];
    const std::tuple<Linear*, uint8_t*, int64_t> parts[] = {
        {&e.w1, w1 + i * d.stride13, d.scale_off13}, {&e.w3, w3 + i * d.stride13, d.scale_off13},
        {&e.w2, w2 + i * d.stride2, d.scale_off2}};
    for (auto [l, dst, scale_off] : parts) {
      queue_copy(dst, l->weight, what);
      if (l->is_fp8()) {
        queue_copy(dst + scale_off, l->scale_inv, what);
        scales_[dst] = reinterpret_cast<const float*>(dst + scale_off);
      }
      l->device = dst;
      linears_.insert(dst);
    }
  }
  experts_[d.w1] = d;  // expert 0's w1 starts the stack
  return Status();
}

Status CudaBackend::prepare_weights(ModelWeights& w) {
  if (cudaSetDevice(device_) != cudaSuccess) return errorf("prepare_weights: cannot select CUDA device {}", device_);
  // What is still to upload (with the device alignment), for the fit check.
  std::set<const void*> seen;
  size_t total = 0;
  auto count = [&](const TensorView& t, size_t bytes) {
    if (!t.empty() && !views_.count(t.data) && seen.insert(t.data).second) total += bytes;
  };
  auto count_view = [&](const TensorView& t) { count(t, bytes_of(t)); };
  auto count_linear = [&](const Linear& l) {
    if (!linears_.count(l.device)) count(l.weight, linear_bytes(l));
  };
  count_view(w.embed);
  count_view(w.final_norm);
  count_linear(w.lm_head);
  for (const LayerWeights& L : w.layers) {
    for (const TensorView* t : {&L.input_norm, &L.post_attention_norm, &L.q_norm, &L.k_norm, &L.router,
                                &L.router_bias})
      count_view(*t);
    for (const Linear* l : {&L.q_proj, &L.k_proj, &L.v_proj, &L.o_proj}) count_linear(*l);
    if (!L.experts.empty() && !experts_.count(L.experts[0].w1.device))
      for (const ExpertWeights& e : L.experts)
        total += align256(linear_bytes(e.w1)) * 2 + align256(linear_bytes(e.w2));
  }
  size_t free_b = 0, total_b = 0;
  if (cudaMemGetInfo(&free_b, &total_b) != cudaSuccess) return errorf("prepare_weights: cudaMemGetInfo failed");
  if (total > free_b)
    return errorf("the weights need {:.2f} GiB but CUDA device {} has {:.2f} of {:.2f} GiB free (fewer layers: "
                  "--num-layers)",
                  total / 1073741824.0, device_, free_b / 1073741824.0, total_b / 1073741824.0);
  pending_copies_.clear();
  M2_RETURN_IF_ERROR(upload_view(w.embed, "embed_tokens"));
  M2_RETURN_IF_ERROR(upload_view(w.final_norm, "norm"));
  M2_RETURN_IF_ERROR(upload_linear(w.lm_head, "lm_head"));
  for (size_t i = 0; i < w.layers.size(); ++i) {
    LayerWeights& L = w.layers[i];
    M2_RETURN_IF_ERROR(upload_view(L.input_norm, "input_layernorm"));
    M2_RETURN_IF_ERROR(upload_view(L.post_attention_norm, "post_attention_layernorm"));
    M2_RETURN_IF_ERROR(upload_view(L.q_norm, "q_norm"));
    M2_RETURN_IF_ERROR(upload_view(L.k_norm, "k_norm"));
    M2_RETURN_IF_ERROR(upload_view(L.router, "gate"));
    M2_RETURN_IF_ERROR(upload_view(L.router_bias, "e_score_correction_bias"));
    bool fused = false;
    M2_RETURN_IF_ERROR(upload_qkv(L, "q_proj|k_proj|v_proj", &fused));
    if (!fused) {
      M2_RETURN_IF_ERROR(upload_linear(L.q_proj, "q_proj"));
      M2_RETURN_IF_ERROR(upload_linear(L.k_proj, "k_proj"));
      M2_RETURN_IF_ERROR(upload_linear(L.v_proj, "v_proj"));
    }
    M2_RETURN_IF_ERROR(upload_linear(L.o_proj, "o_proj"));
    M2_RETURN_IF_ERROR(upload_experts(L, static_cast<int>(i)));
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
                                                      static_cast<int64_t>(c.bytes), d->seed, table, stream_);
          if (e == cudaSuccess) return Status();
          return errorf("{}: generating {} dummy FP8 bytes failed: {}", c.what, c.bytes, cudaGetErrorString(e));
        }
        const cudaError_t e = cudaMemcpy(c.dst, c.src, c.bytes, cudaMemcpyHostToDevice);
        if (e == cudaSuccess) return Status();
        return errorf("{}: upload of {} bytes failed: {}", c.what, c.bytes, cudaGetErrorString(e));
      },
      options));
  const cudaError_t e = cudaStreamSynchronize(stream_);
  if (e != cudaSuccess) return errorf("prepare_weights: generating the dummy FP8 weights failed: {}", cudaGetErrorString(e));
  return Status();
}

const void* CudaBackend::device_view(const TensorView& t, const char* op) const {
  if (t.empty()) return nullptr;
  auto it = views_.find(t.data);
  if (it == views_.end()) {
    log_error("{}: tensor {} {} was not uploaded by prepare_weights", op, dtype_name(t.dtype), t.shape.str());
    std::abort();
  }
  return it->second;
}

DeviceWeight CudaBackend::device_weight(const Linear& l, const char* op) const {
  if (!linears_.count(l.device)) {
    log_error("{}: linear {} {} was not uploaded by prepare_weights", op, dtype_name(l.weight.dtype),
              l.weight.shape.str());
    std::abort();
  }
  DeviceWeight d;
  d.data = static_cast<const uint8_t*>(l.device);
  d.dtype = l.weight.dtype;
  d.rows = l.out_features();
  d.cols = l.in_features();
  if (l.is_fp8()) {
    d.scales = scales_.at(l.device);
    d.scale_ld = l.scale_inv.shape[1];
  }
  return d;
}

const DeviceExperts& CudaBackend::device_experts(const LayerWeights& layer) const {
  auto it = layer.experts.empty() ? experts_.end() : experts_.find(layer.experts[0].w1.device);
  if (it == experts_.end()) {
    log_error("moe: the experts of this layer were not uploaded by prepare_weights");
    std::abort();
  }
  return it->second;
}

}  // namespace m2::cuda
