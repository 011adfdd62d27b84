// The CUDA backend's ops: validate, upload the small host arrays the op takes
// (ids, positions, slots, block tables; once per step, see DeviceArray),
// launch, check. The kernels are in the .cu files of this folder.
#include "backend/cuda/attention/attention.h"
#include "backend/cuda/attention/qk_norm_rope.h"
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/elementwise/elementwise.h"
#include "backend/cuda/gemm/matmul.h"
#include "backend/cuda/moe/moe.h"
#include "backend/cuda/moe/route.h"
#include "backend/cuda/runtime/device_kernels.h"
#include "backend/cuda/runtime/roofline.h"

#include <algorithm>
#include <cstdlib>
#include <cmath>
#include <cstring>

#include "backend/cuda/attention/attention_prefill.h"
#include "backend/cuda/moe/moe_cutlass.h"
#include "backend/cuda/moe/moe_decode.h"
#include "backend/cuda/runtime/backend_impl.h"
#include "backend/cuda/runtime/scratch_plan.h"
#include "backend/cuda/runtime/check.h"
#include "util/log.h"

namespace m2 {

int cuda_device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();  // no driver or no device: not an error for callers
    return 0;
  }
  return n;
}

std::unique_ptr<Backend> make_cuda_backend(int device, const cuda::CudaOptions& options) {
  const int n = cuda_device_count();
  if (device < 0 || device >= n) {
    log_error("CUDA device {} is not available ({} device(s) visible)", device, n);
    return nullptr;
  }
  const Result<cuda::CudaArch> arch = cuda::probe_cuda_arch(device);
  if (!arch.ok()) {
    log_error("{}", arch.status().message());
    return nullptr;
  }
  return std::make_unique<cuda::CudaBackend>(device, arch.value(), options);
}

std::string cuda_describe_plans(const ModelConfig& config, std::span<const cuda::StepShape> steps,
                                const cuda::CudaOptions& options, const StepLimits& limits) {
  cuda::DeviceCaps caps = cuda::h200_caps();
  std::string where = "an H200 (132 SMs; no CUDA device here)";
  if (cuda_device_count() > 0) {
    const Result<cuda::CudaArch> arch = cuda::probe_cuda_arch(0);
    cudaDeviceProp prop{};
    int sms = 0;
    if (arch.ok() && cudaGetDeviceProperties(&prop, 0) == cudaSuccess &&
        cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0) == cudaSuccess) {
      caps = cuda::device_caps(arch.value(), sms);
      where = fmt::format("CUDA device 0, {} (sm_{}, {} SMs)", prop.name, arch.value().device, sms);
    }
  }
  std::string out = fmt::format("CUDA kernels on {}\noptions {}\n", where, options.describe());
  for (const cuda::StepShape& s : steps) out += "\n" + cuda::describe_step_plan(config, s, options, caps);
  out += fmt::format("\nsteps of at most {} tokens, {} sequences, {} logit rows, {} tokens of context, {} KV blocks of {} "
                     "({}):\n  ",
                     limits.max_tokens, limits.max_seqs, limits.max_logit_rows, limits.max_context,
                     limits.cache.num_blocks, limits.cache.block_size, dtype_name(limits.cache.dtype));
  out += cuda::plan_scratch(config, limits, options, caps).describe();
  return out;
}

CudaCeilings cuda_measure_ceilings(int device, bool gemm) {
  CudaCeilings c;
  if (cudaSetDevice(device) != cudaSuccess) return c;
  if (cuda::measure_copy_bandwidth(size_t{2} << 30, &c.copy_bytes_per_s) != cudaSuccess) cudaGetLastError();
  if (gemm && cuda::measure_gemm_flops(DType::kBF16, &c.bf16_flops) != cudaSuccess) cudaGetLastError();
  if (gemm && cuda::measure_gemm_flops(DType::kF8E4M3, &c.fp8_flops) != cudaSuccess) cudaGetLastError();
  return c;
}

void* cuda_stream(Backend& b) { return static_cast<cuda::CudaBackend&>(b).stream(); }

int64_t cuda_fp8_copies_used(Backend& b) { return static_cast<cuda::CudaBackend&>(b).fp8_copies_used(); }
int64_t cuda_graphs_recorded(Backend& b) { return static_cast<cuda::CudaBackend&>(b).graphs_recorded(); }
HostExpertInfo cuda_host_experts(Backend& b) { return static_cast<cuda::CudaBackend&>(b).host_expert_info(); }

namespace cuda {
namespace {

std::string shape(const Act& a) { return fmt::format("[{}, {}]", a.rows, a.cols); }

// Packs `v` into `bytes` at a 16-byte boundary; returns its offset.
template <class T>
size_t pack(std::vector<uint8_t>& bytes, const std::vector<T>& v) {
  const size_t off = (bytes.size() + 15) / 16 * 16;
  bytes.resize(off + v.size() * sizeof(T));
  if (!v.empty()) std::memcpy(bytes.data() + off, v.data(), v.size() * sizeof(T));
  return off;
}

}  // namespace

CudaBackend::CudaBackend(int device, const CudaArch& arch, const CudaOptions& options)
    : device_(device), options_(options), features_(cuda_features(arch)) {
  M2_CUDA_CHECK(cudaSetDevice(device), "selecting CUDA device {}", device);
  if (const std::string off = describe_fallbacks(arch, features_); !off.empty())
    log_warn("CUDA device {}: {}", device, off);
  allow_pdl(device, options.pdl);
  current_device_has_pdl();  // probed now, not first inside a graph capture
  M2_CUDA_CHECK(cudaDeviceGetAttribute(&num_sms_, cudaDevAttrMultiProcessorCount, device), "device {}", device);
  caps_ = device_caps(arch, num_sms_);
  log_info("CUDA device {}: options {}", device, options.describe());
  // A blocking stream: work on the legacy default stream (benchmarks' events)
  // is ordered with it.
  M2_CUDA_CHECK(cudaStreamCreate(&stream_), "creating a stream on device {}", device);
  sync_each_op_ = options.sync_each_op;
  tc_attention_ = options.tc_attention;
  split_decode_ = options.split_decode;
  flashinfer_prefill_ = tc_attention_ && caps_.flashinfer_prefill && options.flashinfer_prefill;
  if (options.profile) profile_ = std::make_unique<OpProfile>();
  graphs_enabled_ = options.graphs && !sync_each_op_ && !profile_;
}

CudaBackend::~CudaBackend() {
  cudaSetDevice(device_);
  cudaStreamSynchronize(stream_);
  profile_.reset();  // prints its table
  drop_graphs();
  for (void* p : weight_memory_) cudaFree(p);
  cudaStreamDestroy(stream_);
  // A teardown error left pending on this thread would be reported by the
  // next checked launch of another backend as its own (a suspect of the
  // "invalid argument" attention launches seen only in the test process).
  if (const cudaError_t e = cudaGetLastError(); e != cudaSuccess)
    log_warn("CUDA backend on GPU {}: an error at teardown: {} ({})", device_, cudaGetErrorName(e),
             cudaGetErrorString(e));
}

void CudaBackend::bind_device() const {
  int current = -1;
  if (cudaGetDevice(&current) != cudaSuccess || current != device_)
    M2_CUDA_CHECK(cudaSetDevice(device_), "selecting CUDA device {}", device_);
}

std::shared_ptr<void> CudaBackend::allocate(size_t bytes) {
  bind_device();
  bump_memory_generation();  // recorded step graphs may hold the address a freed buffer had
  void* p = nullptr;
  const cudaError_t e = cudaMalloc(&p, std::max<size_t>(bytes, 1));
  if (e != cudaSuccess) {
    size_t free_b = 0, total_b = 0;
    cudaMemGetInfo(&free_b, &total_b);
    die(e, "cudaMalloc",
        fmt::format("allocate {:.3f} GiB on device {} ({:.2f} of {:.2f} GiB free)", bytes / 1073741824.0, device_,
                    free_b / 1073741824.0, total_b / 1073741824.0),
        __FILE__, __LINE__);
  }
  return std::shared_ptr<void>(p, [](void* q) { cudaFree(q); });
}

void CudaBackend::copy_to_host(const void* src, void* dst_host, size_t bytes) {
  bind_device();
  M2_CUDA_CHECK(cudaMemcpyAsync(dst_host, src, bytes, cudaMemcpyDeviceToHost, stream_),
                "copy_to_host of {} bytes", bytes);
  M2_CUDA_CHECK(cudaStreamSynchronize(stream_),
                "the ops queued before copy_to_host of {} bytes (M2CPP_CUDA_OPTIONS=sync=on names the failing op)", bytes);
}

void CudaBackend::copy_from_host(const void* src_host, void* dst, size_t bytes) {
  bind_device();
  M2_CUDA_CHECK(cudaMemcpyAsync(dst, src_host, bytes, cudaMemcpyHostToDevice, stream_), "copy_from_host of {} bytes",
                bytes);
}

void CudaBackend::embed(const Weight& table, std::span<const int32_t> ids, int64_t first_id, Act out) {
  bind_device();
  auto timer = timed([&] { return fmt::format("embed T={}", ids.size()); });
  const int32_t* d_ids = static_cast<const int32_t*>(upload(ids_, ids.data(), ids.size_bytes(), "token ids"));
  const int64_t T = static_cast<int64_t>(ids.size());
  check(launch_embed(device_view(table, "embed"), table.dtype, table.shape[0], first_id, out.cols, d_ids, T, out.data,
                     stream_),
        "embed",
        [&] { return fmt::format("embed {} ids from {} {} into {}", T, dtype_name(table.dtype), table.shape.str(), shape(out)); });
}

ActCopy CudaBackend::rms_norm(Act x, const Weight& weight, float eps, Act out) {
  bind_device();
  auto timer = timed([&] { return fmt::format("rms_norm T={}", x.rows); });
  ActCopy copy;
  check(launch_rms_norm(x.data, x.rows, x.cols, device_view(weight, "rms_norm"), weight.dtype, eps, out.data,
                        fp8_copy_for(out, &copy), stream_),
        "rms_norm", [&] { return fmt::format("rms_norm of {} by {} {}", shape(x), dtype_name(weight.dtype), weight.shape.str()); });
  return copy;
}

void CudaBackend::add(Act x, Act y) {
  bind_device();
  auto timer = timed([&] { return fmt::format("add T={}", x.rows); });
  check(launch_add(x.data, y.data, x.rows * x.cols, stream_), "add",
        [&] { return fmt::format("add {} += {}", shape(x), shape(y)); });
}

void CudaBackend::gather_rows(Act x, std::span<const int64_t> rows, Act out) {
  bind_device();
  auto timer = timed([&] { return fmt::format("gather_rows T={}", rows.size()); });
  const int64_t* d_rows = static_cast<const int64_t*>(upload(rows_, rows.data(), rows.size_bytes(), "rows"));
  check(launch_gather_rows(x.data, x.cols, d_rows, static_cast<int64_t>(rows.size()), out.data, stream_), "gather_rows",
        [&] { return fmt::format("gather_rows of {} rows of {}", rows.size(), shape(x)); });
}

MatmulShape CudaBackend::matmul_shape(const Act& x, const DeviceWeight& d, const Act& y) const {
  auto aligned16 = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
  MatmulShape s;
  s.tokens = x.rows, s.rows = d.rows, s.cols = d.cols, s.dtype = d.dtype;
  s.packed_scales = d.dtype != DType::kF8E4M3 || d.scale_ld == d.cols / kFp8Block;
  s.aligned = aligned16(x.data) && aligned16(y.data) && aligned16(d.data) && x.cols % 4 == 0 && y.cols % 4 == 0;
  return s;
}

void CudaBackend::matmul(Act x, const Linear& w, Act y, const ActCopy& xc) {
  bind_device();
  auto timer = timed([&] { return fmt::format("matmul T={} {}", x.rows, w.weight.shape.str()); });
  const DeviceWeight d = device_weight(w, "matmul");
  auto context = [&] {
    return fmt::format("matmul x {} · W {} {} -> y {}", shape(x), dtype_name(w.weight.dtype), w.weight.shape.str(), shape(y));
  };
  if (x.cols != d.cols || y.cols != d.rows || y.rows != x.rows) die(cudaErrorInvalidValue, "matmul", context(), __FILE__, __LINE__);
  const MatmulPlan plan = plan_matmul(matmul_shape(x, d, y), options_, caps_);
  switch (plan.kernel) {
    case MatmulKernel::kFp8Own:
    case MatmulKernel::kFp8CublasLt: {
      const Fp8Out x8 = fp8_copy_.use(xc, x);  // x as its producer quantised it, if it did
      check(x8.q ? fp8_matmul_.run_quantized(plan, x8.q, x8.s, x.rows, d, y.data, y.cols, stream_)
                 : fp8_matmul_.run(plan, x.data, x.rows, x.cols, d, y.data, y.cols, stream_),
            "matmul", [&] {
              return fmt::format("{} ({}, FP8 activations{})", context(), plan.describe(),
                                 x8.q ? " from x's producer" : "");
            });
      return;
    }
    case MatmulKernel::kBf16CublasLt: {
      // cudaErrorNotSupported: cuBLASLt has no algorithm for the shape (logged), the fallback runs it.
      const cudaError_t e = bf16_matmul_.run(x.data, x.rows, x.cols, d, y.data, y.cols, stream_);
      if (e != cudaErrorNotSupported) {
        check(e, "matmul", [&] { return fmt::format("{} ({})", context(), plan.describe()); });
        return;
      }
      break;
    }
    default: break;
  }
  check(launch_matmul(plan.fallback, x.data, x.rows, x.cols, d, single_out(y.data, y.cols, d.rows), num_sms_, stream_),
        "matmul", [&] { return fmt::format("{} ({})", context(), matmul_kernel_name(plan.fallback)); });
}

namespace {
QkNormRopeArgs qk_args(Act q, Act k, const void* q_norm, const TensorView& qn, const void* k_norm, const TensorView& kn,
                       float eps, const RopeParams& rope) {
  QkNormRopeArgs a;
  a.q = q.data, a.k = k.data, a.T = q.rows, a.q_dim = q.cols, a.kv_dim = k.cols;
  a.q_norm = q_norm, a.k_norm = k_norm, a.q_norm_dtype = qn.dtype, a.k_norm_dtype = kn.dtype;
  a.q_norm_width = q.cols, a.kv_norm_width = k.cols;  // one GPU: the local widths are the full widths
  a.eps = eps;
  a.head_dim = rope.head_dim, a.rotary_dim = rope.rotary_dim;
  for (int i = 0; i < rope.rotary_dim / 2 && i < kQkMaxHalfRotary; ++i)
    a.inv_freq[i] = 1.0 / std::pow(rope.theta, (2.0 * i) / rope.rotary_dim);  // as the CPU backend
  return a;
}
}  // namespace

void CudaBackend::qk_norm_rope(Act q, Act k, const Weight& q_norm, const Weight& k_norm, float eps,
                               std::span<const int32_t> positions, const RopeParams& rope) {
  bind_device();
  auto timer = timed([&] { return fmt::format("qk_norm_rope T={}", q.rows); });
  QkNormRopeArgs a = qk_args(q, k, device_view(q_norm, "qk_norm_rope"), q_norm, device_view(k_norm, "qk_norm_rope"),
                             k_norm, eps, rope);
  a.positions = static_cast<const int32_t*>(upload(positions_, positions.data(), positions.size_bytes(), "positions"));
  check(launch_qk_norm_rope(a, stream_), "qk_norm_rope", [&] {
    return fmt::format("qk_norm_rope of q {} and k {} (head_dim {}, rotary_dim {})", shape(q), shape(k), rope.head_dim,
                       rope.rotary_dim);
  });
}

void CudaBackend::qk_sum_squares(Act q, Act k, Act ss) {
  bind_device();
  auto timer = timed([&] { return fmt::format("qk_sum_squares T={}", q.rows); });
  // (The kernel's first phase only: no norm weights, no rotation; head_dim 4
  // satisfies its shape checks for any width that is a multiple of 4.)
  QkNormRopeArgs a = qk_args(q, k, nullptr, TensorView{}, nullptr, TensorView{}, 0.0f, RopeParams{4, 0, 1.0});
  a.sums_out = ss.data;
  check(launch_qk_norm_rope(a, stream_), "qk_sum_squares",
        [&] { return fmt::format("qk_sum_squares of q {} and k {} into {}", shape(q), shape(k), shape(ss)); });
}

void CudaBackend::qk_norm_rope_sums(Act q, Act k, Act ss, double q_count, double k_count, const Weight& q_norm,
                                    const Weight& k_norm, float eps, std::span<const int32_t> positions,
                                    const RopeParams& rope) {
  bind_device();
  auto timer = timed([&] { return fmt::format("qk_norm_rope_sums T={}", q.rows); });
  QkNormRopeArgs a = qk_args(q, k, device_view(q_norm, "qk_norm_rope_sums"), q_norm,
                             device_view(k_norm, "qk_norm_rope_sums"), k_norm, eps, rope);
  a.sums_in = ss.data;
  a.q_norm_width = static_cast<int64_t>(q_count), a.kv_norm_width = static_cast<int64_t>(k_count);
  a.positions = static_cast<const int32_t*>(upload(positions_, positions.data(), positions.size_bytes(), "positions"));
  check(launch_qk_norm_rope(a, stream_), "qk_norm_rope_sums", [&] {
    return fmt::format("qk_norm_rope_sums of q {} and k {} over {} and {} elements (head_dim {}, rotary_dim {})",
                       shape(q), shape(k), q_count, k_count, rope.head_dim, rope.rotary_dim);
  });
}

void CudaBackend::qk_norm_rope_store(Act q, Act k, Act v, const Weight& q_norm, const Weight& k_norm,
                                     float eps, std::span<const int32_t> positions, const RopeParams& rope,
                                     KvCache& cache, int layer, std::span<const int64_t> slots) {
  const KvCacheShape& s = cache.shape();
  // The kernel takes an FP8 cache's scales per rope head (its cache rows
  // need only the row width).
  if (v.cols != k.cols || s.token_elems() != k.cols || (s.scaled() && s.head_dim != rope.head_dim)) {
    Backend::qk_norm_rope_store(q, k, v, q_norm, k_norm, eps, positions, rope, cache, layer, slots);
    return;
  }
  bind_device();
  auto timer = timed([&] { return fmt::format("qk_norm_rope_store T={}", q.rows); });
  QkNormRopeArgs a = qk_args(q, k, device_view(q_norm, "qk_norm_rope"), q_norm, device_view(k_norm, "qk_norm_rope"),
                             k_norm, eps, rope);
  a.positions = static_cast<const int32_t*>(upload(positions_, positions.data(), positions.size_bytes(), "positions"));
  a.v = v.data;
  a.slots = static_cast<const int64_t*>(upload(slots_, slots.data(), slots.size_bytes(), "slots"));
  a.k_cache = cache.k_base(layer), a.v_cache = cache.v_base(layer), a.cache_dtype = s.dtype;
  a.k_scales = cache.k_scales(layer), a.v_scales = cache.v_scales(layer);  // FP8 only (null otherwise)
  check(launch_qk_norm_rope(a, stream_), "qk_norm_rope_store", [&] {
    return fmt::format("qk_norm_rope_store of q {}, k {}, v {} into a {} cache (layer {}, head_dim {}, rotary_dim {})",
                       shape(q), shape(k), shape(v), dtype_name(s.dtype), layer, rope.head_dim, rope.rotary_dim);
  });
}

void CudaBackend::kv_store(KvCache& cache, int layer, Act k, Act v, std::span<const int64_t> slots) {
  bind_device();
  auto timer = timed([&] { return fmt::format("kv_store T={}", k.rows); });
  const KvCacheShape& s = cache.shape();
  const int64_t* d_slots = static_cast<const int64_t*>(upload(slots_, slots.data(), slots.size_bytes(), "slots"));
  check(launch_kv_store(k.data, v.data, static_cast<int64_t>(slots.size()), d_slots, s.num_kv_heads, s.head_dim,
                        cache.k_base(layer), cache.v_base(layer), cache.k_scales(layer), cache.v_scales(layer), s.dtype,
                        stream_),
        "kv_store", [&] {
          return fmt::format("kv_store of k {} and v {} into a {} cache (layer {})", shape(k), shape(v),
                             dtype_name(s.dtype), layer);
        });
}

ActCopy CudaBackend::attention(Act q, const KvCache& cache, int layer, std::span<const SeqSlice> seqs,
                               int num_heads, float scale, Act out) {
  ActCopy copy;  // out's, written by the prefill kernel when it writes every row
  bind_device();
  auto timer = timed([&] { return fmt::format("attention T={} ({} seqs)", q.rows, seqs.size()); });
  const KvCacheShape& s = cache.shape();
  const int G = num_heads / s.num_kv_heads;
  const bool invariant = options_.batch_invariant;
  const AttnMeta meta = upload_attention_meta(seqs, G, s.dtype, s.head_dim);
  // A step that may be recorded is planned for its context bound
  // (context_bound_), so that one recording serves every context up to it:
  // the general kernel's splits are sized by it, the decode kernels' do not
  // depend on it (decode_attention).
  AttentionArgs a;
  a.q = q.data, a.out = out.data, a.T = q.rows;
  a.k_cache = cache.k_base(layer), a.v_cache = cache.v_base(layer), a.dtype = s.dtype;
  a.k_scales = cache.k_scales(layer), a.v_scales = cache.v_scales(layer);
  a.block_size = s.block_size, a.kv_heads = s.num_kv_heads, a.head_dim = s.head_dim, a.group = G, a.scale = scale;
  a.seqs = reinterpret_cast<const AttnSeq*>(meta.device + meta.seq_off);
  a.items = reinterpret_cast<const AttnItem*>(meta.device + meta.item_off);
  a.num_items = meta.num_items;
  a.block_tables = reinterpret_cast<const int32_t*>(meta.device + meta.table_off);
  if (G * s.num_kv_heads != num_heads || meta.num_items + meta.num_prefill_items + meta.num_decode_items == 0)
    die(cudaErrorInvalidValue, "attention",
        fmt::format("attention of q {} with {} heads over {} kv heads ({} sequences)", shape(q), num_heads,
                    s.num_kv_heads, seqs.size()),
        __FILE__, __LINE__);
  if (meta.num_prefill_items > 0) {
    AttentionArgs p = a;
    p.items = reinterpret_cast<const AttnItem*>(meta.device + meta.prefill_off);
    p.num_items = meta.num_prefill_items;
    // The prefill kernel writes every row of out when it has all the work:
    // then also out's FP8 copy (a head of 128 = one quantisation group), for o_proj.
    if (meta.num_items == 0 && meta.num_decode_items == 0 && out.cols == int64_t{num_heads} * s.head_dim)
      p.out8 = fp8_copy_for(out, &copy);
    if (flashinfer_prefill_ && !invariant && (s.dtype == DType::kBF16 || s.dtype == DType::kF8E4M3) &&
        s.head_dim == kFlashInferHeadDim && !capturing_) {
      attention_prefill_flashinfer(q, meta, seqs, p, num_heads, p.out8, out);
    } else {
      check(launch_attention_prefill(p, stream_), "attention (prefill)", [&] {
        return fmt::format("tensor-core prefill attention of q {} over a {} cache (layer {}, {} items of {} vectors, "
                           "{} kv heads x {}, group {})",
                           shape(q), dtype_name(s.dtype), layer, p.num_items, kPrefillVectors, s.num_kv_heads,
                           s.head_dim, G);
      });
    }
  }
  if (meta.num_decode_items > 0) {
    AttentionArgs d = a;
    d.seqs = reinterpret_cast<const AttnSeq*>(meta.device + meta.decode_off);
    d.items = nullptr;
    d.num_items = meta.num_decode_items;
    const DecodeAttention plan = decode_attention(d.num_items, s.num_kv_heads, std::max(meta.max_decode_keys, context_bound_),
                                                  s.dtype, s.head_dim, G, context_bound_ > 0);
    d.splits = plan.splits.splits, d.split_keys = plan.splits.split_keys;
    if (d.splits > 1) {
      d.partials = static_cast<float*>(attn_decode_partials_.reserve(
          attention_decode_partial_floats(d.num_items, s.num_kv_heads, d.splits) * sizeof(float), stream_));
      d.counters = static_cast<unsigned*>(
          attn_counters_.reserve(sizeof(unsigned) * d.num_items * s.num_kv_heads, stream_, true));
    }
    const bool mma = plan.mma;
    check(mma ? launch_attention_decode_mma(d, stream_) : launch_attention_decode(d, stream_), "attention (decode)", [&] {
      return fmt::format("{} decode attention of q {} over a {} cache (layer {}, {} rows, {} kv heads x {}, group {}, {} "
                         "splits of {} keys)",
                         mma ? "tensor-core" : "SIMT", shape(q), dtype_name(s.dtype), layer, d.num_items,
                         s.num_kv_heads, s.head_dim, G, d.splits, d.split_keys);
    });
  }
  if (meta.num_items == 0) return copy;
  // At least 128 keys (a tile per warp) per split; batch invariance: splits
  // at fixed positions, the items launched in groups whose partials fit.
  const int64_t max_keys = std::max(meta.max_keys, context_bound_);
  int64_t per_launch = a.num_items;
  if (invariant) {
    const AttentionSplits sp = attention_splits_invariant(max_keys);
    a.splits = sp.splits, a.split_keys = sp.split_keys;
    if (a.splits > 1) per_launch = attention_invariant_items_per_launch(s.num_kv_heads, s.head_dim, a.splits);
  } else {
    size_splits(a, a.num_items, max_keys, 128);
  }
  if (a.splits > 1)
    a.partials = static_cast<float*>(attn_partials_.reserve(
        attention_partial_floats(std::min(a.num_items, per_launch), s.num_kv_heads, s.head_dim, a.splits) *
            sizeof(float),
        stream_));
  auto context = [&] {
    return fmt::format("attention of q {} over a {} cache (layer {}, {} sequences, {} kv heads x {}, group {}, {} splits)",
                       shape(q), dtype_name(s.dtype), layer, seqs.size(), s.num_kv_heads, s.head_dim, G, a.splits);
  };
  const AttnItem* items = a.items;
  const int64_t num_items = a.num_items;
  for (int64_t first = 0; first < num_items; first += per_launch) {
    a.items = items + first, a.num_items = std::min(per_launch, num_items - first);
    check(launch_attention(a, stream_), "attention", context);
  }
  return copy;
}

void CudaBackend::route(Act x, const Weight& gate, const Weight& bias, int top_k, float scaling, Routing out) {
  bind_device();
  auto timer = timed([&] { return fmt::format("route T={}", x.rows); });
  RouteArgs a;
  a.x = x.data, a.T = x.rows;
  a.gate = DeviceWeight{static_cast<const uint8_t*>(device_view(gate, "route")), nullptr, gate.dtype, gate.shape[0],
                        gate.shape[1], 0};
  a.bias = device_view(bias, "route"), a.bias_dtype = bias.dtype;
  a.top_k = top_k, a.scaling = scaling;
  a.logits = static_cast<float*>(route_logits_.reserve(sizeof(float) * x.rows * gate.shape[0], stream_));
  a.expert_ids = out.expert_ids, a.weights = out.weights;
  auto context = [&] {
    return fmt::format("route of x {} by gate {} {} (top {})", shape(x), dtype_name(gate.dtype), gate.shape.str(), top_k);
  };
  if (x.cols != gate.shape[1]) die(cudaErrorInvalidValue, "route", context(), __FILE__, __LINE__);
  if (plan_route(x.rows, gate.shape[0], gate.shape[1], gate.dtype, options_) == RouteKernel::kGemm) {
    // cudaErrorNotSupported: cuBLASLt has no algorithm (logged); InvalidValue: unaligned buffers. Both: the fused kernel.
    const cudaError_t e = route_gemm_.logits(a.x, a.T, a.gate, a.logits, stream_);
    if (e == cudaSuccess) {
      check(launch_route_select(a, stream_), "route (selection)", context);
      return;
    }
    if (e != cudaErrorNotSupported && e != cudaErrorInvalidValue) die(e, "route (fp32 GEMM)", context(), __FILE__, __LINE__);
  }
  // The one-kernel router's per-group counters (the selection alone needs none).
  a.counters = static_cast<unsigned*>(route_counters_.reserve(sizeof(unsigned) * route_counter_count(x.rows), stream_, true));
  check(launch_route(a, num_sms_, stream_), "route", context);
}

void CudaBackend::route_forced(Act x, const Weight& gate, const Weight& bias, int top_k, float scaling,
                               std::span<const int32_t> forced, Routing out) {
  route(x, gate, bias, top_k, scaling, out);  // the rows not forced
  const size_t pairs = static_cast<size_t>(x.rows) * top_k;
  bind_device();
  auto timer = timed([&] { return fmt::format("route_forced T={}", x.rows); });
  auto context = [&] {
    return fmt::format("route_forced of x {} by gate {} {} (top {}, {} forced ids)", shape(x), dtype_name(gate.dtype),
                       gate.shape.str(), top_k, forced.size());
  };
  const int64_t E = gate.shape[0];
  if (forced.size() != pairs) die(cudaErrorInvalidValue, "route_forced", context(), __FILE__, __LINE__);
  // Every row's logits as route() left them (both its kernels write them
  // there): the forced weights come from the very logits the router's own
  // would, so replaying a reported routing is bit-identical.
  const auto* logits = static_cast<const float*>(route_logits_.reserve(sizeof(float) * x.rows * E, stream_));
  const auto* ids = static_cast<const int32_t*>(upload(forced_ids_, forced.data(), forced.size_bytes(), "forced ids"));
  check(launch_route_forced(logits, x.rows, E, ids, top_k, scaling, out.expert_ids, out.weights, stream_),
        "route_forced", context);
}

void CudaBackend::moe(Act x, const LayerWeights& layer, const Routing& routing, Act out, const ActCopy& xc) {
  if (layer.experts.empty() || !owns(layer.prepared_experts)) {
    log_error("moe: the experts of this layer were not uploaded by this backend's prepare_weights");
    std::abort();
  }
  const auto& prepared = *static_cast<const PreparedExperts*>(layer.prepared_experts);
  if (prepared.host) return moe_host(x, prepared, routing, out, xc);
  moe_on(x, prepared.experts, routing, out, xc);
}

void CudaBackend::moe_on(Act x, const DeviceExperts& experts, const Routing& routing, Act out, const ActCopy& xc) {
  bind_device();
  auto timer = timed([&] { return fmt::format("moe T={}", x.rows); });
  MoeArgs a;
  a.x = x.data, a.T = x.rows;
  a.experts = experts;
  a.expert_ids = routing.expert_ids, a.weights = routing.weights, a.top_k = routing.top_k;
  if (experts.num_experts < experts.router_experts) {  // expert parallelism: this rank's experts only
    const int64_t n = x.rows * routing.top_k;
    auto* ids = static_cast<int32_t*>(moe_local_routing_.reserve(n * (sizeof(int32_t) + sizeof(float)), stream_));
    auto* weights = reinterpret_cast<float*>(ids + n);
    check(launch_route_local(routing.expert_ids, routing.weights, n, static_cast<int>(experts.first_expert),
                             static_cast<int>(experts.num_experts), ids, weights, stream_),
          "route_local", [&] { return fmt::format("{} pairs", n); });
    a.expert_ids = ids, a.weights = weights;
  }
  a.out = out.data;
  a.num_sms = num_sms_;
  // The plan's kernel, in the flags launch_moe selects by.
  const MoePlan plan = plan_moe({x.rows, routing.top_k, a.experts.hidden, a.experts.intermediate,
                                 a.experts.num_experts, a.experts.dtype},
                                options_, caps_);
  a.fp8_tensor_cores = plan.fp8_activations;
  a.use_cutlass = plan.kernel == MoeKernel::kGroupedCutlass;
  a.wgmma_decode = plan.kernel == MoeKernel::kDecodeWgmma;
  a.always_grouped = plan.kernel != MoeKernel::kDecodeWgmma && plan.kernel != MoeKernel::kDecodeSimt;
  if (a.wgmma_decode)
    a.counters = static_cast<unsigned*>(moe_counters_.reserve(
        sizeof(unsigned) * moe_decode_counter_count(x.rows, a.experts.hidden), stream_, true));
  if (moe_reads_x8(a)) {
    const Fp8Out x8 = fp8_copy_.use(xc, x);  // x as its producer quantised it, if it did
    a.x8 = x8.q, a.sx = x8.s;
  }
  a.scratch = moe_scratch_.reserve(plan.scratch_bytes, stream_);
  auto context = [&] {
    return fmt::format("moe of x {} over {} {} experts [{}, {}] (top {}; {})", shape(x), a.experts.num_experts,
                       dtype_name(a.experts.dtype), a.experts.intermediate, a.experts.hidden, routing.top_k,
                       plan.describe());
  };
  if (x.cols != a.experts.hidden) die(cudaErrorInvalidValue, "moe", context(), __FILE__, __LINE__);
  check(launch_moe(a, stream_), "moe", context);
}

Fp8Out CudaBackend::fp8_copy_for(const Act& out, ActCopy* handle) {
  // (The grouped FP8 MoE, too, runs only when the FP8 GEMM mode is not off.)
  const bool fp8_paths = fp8_matmul_.mode() != Fp8GemmMode::kOff;
  if (!fp8_paths || !has_fp8_weights_ || out.rows < fp8_gemm_min_tokens(options_) || out.cols % kFp8Block != 0 ||
      reinterpret_cast<uintptr_t>(out.data) % 16 != 0)
    return {};
  return fp8_copy_.produce(out, handle, stream_);
}

CudaBackend::DecodeAttention CudaBackend::decode_attention(int64_t seqs, int kv_heads, int64_t max_keys, DType dtype,
                                                           int head_dim, int group, bool recordable) const {
  DecodeAttention d;
  d.splits = recordable ? attention_splits_recorded(seqs * kv_heads, max_keys, num_sms_, kDecodeTileKeys)
                        : attention_splits(seqs * kv_heads, max_keys, num_sms_, kDecodeTileKeys);
  // Enough (sequence, kv head) blocks for no split: tensor cores (the SIMT
  // kernel is shared-memory bound at large batches).
  d.mma = tc_attention_ && attention_decode_on_mma(dtype, head_dim, group, d.splits, split_decode_);
  return d;
}

void CudaBackend::size_splits(AttentionArgs& a, int64_t items, int64_t max_keys, int granule) const {
  const AttentionSplits sp = attention_splits(items * a.kv_heads, max_keys, num_sms_, granule);
  a.splits = sp.splits, a.split_keys = sp.split_keys;
}

CudaBackend::AttnMeta CudaBackend::upload_attention_meta(std::span<const SeqSlice> seqs, int group, DType cache_dtype,
                                                        int head_dim) {
  // The kernels the sequences may take (attention_path); batch invariance:
  // one for every row (attention_plan.h).
  const bool invariant = options_.batch_invariant;
  const bool prefill_ok = attention_prefill_on(options_, cache_dtype, head_dim);
  const bool decode_ok = attention_decode_supports(cache_dtype, head_dim, group);
  // Work list: each sequence's (row, head-in-group) vectors in items of 8
  // (general kernel), or of kPrefillVectors for the tensor-core prefill
  // kernel (sequences of >= kPrefillMinRows rows, caches it supports).
  std::vector<AttnSeq> seq_list, decode_seqs;  // decode_seqs: the decode kernel's rows, one sequence each
  std::vector<AttnItem> items, prefill_items;
  std::vector<int32_t> tables;
  AttnMeta m;
  for (size_t i = 0; i < seqs.size(); ++i) {
    const SeqSlice& sq = seqs[i];
    seq_list.push_back({static_cast<int32_t>(sq.first_row), static_cast<int32_t>(sq.num_rows),
                        static_cast<int32_t>(sq.context_len), static_cast<int32_t>(tables.size())});
    tables.insert(tables.end(), sq.block_table.begin(), sq.block_table.end());
    const AttnPath path = attention_path(sq.num_rows, prefill_ok, decode_ok, invariant);
    if (path == AttnPath::kPrefill) {
      m.prefill_seqs.push_back(static_cast<int32_t>(i));
      // Last vectors first: causal, their blocks see the most keys, so they start first.
      for (int64_t v = (sq.num_rows * group - 1) / kPrefillVectors * kPrefillVectors; v >= 0; v -= kPrefillVectors)
        prefill_items.push_back({static_cast<int32_t>(i), static_cast<int32_t>(v)});
      continue;
    }
    if (path == AttnPath::kDecode) {
      decode_seqs.push_back(seq_list.back());
      m.max_decode_keys = std::max(m.max_decode_keys, sq.context_len);
      continue;
    }
    for (int64_t v = 0; v < sq.num_rows * group; v += kAttnVectors)
      items.push_back({static_cast<int32_t>(i), static_cast<int32_t>(v)});
    m.max_keys = std::max(m.max_keys, sq.context_len);  // of the general kernel's sequences
  }
  // The block tables last: they grow as contexts do, and a recorded decode
  // graph reads every section at the offset it had when it was recorded
  // (with the tables first or between, a grown table moved the decode
  // sequences under a replay, which then read block ids as sequences).
  // The other sections' sizes depend only on the step's shape (the graph key).
  attn_meta_host_.clear();
  m.seq_off = pack(attn_meta_host_, seq_list), m.item_off = pack(attn_meta_host_, items);
  m.prefill_off = pack(attn_meta_host_, prefill_items), m.decode_off = pack(attn_meta_host_, decode_seqs);
  m.table_off = pack(attn_meta_host_, tables);
  m.num_items = static_cast<int64_t>(items.size());
  m.num_prefill_items = static_cast<int64_t>(prefill_items.size());
  m.num_decode_items = static_cast<int64_t>(decode_seqs.size());
  m.device = static_cast<const uint8_t*>(upload(attn_meta_, attn_meta_host_.data(), attn_meta_host_.size(),
                                                "the attention work list"));
  m.seqs = std::move(seq_list);
  return m;
}

const void* CudaBackend::upload(DeviceArray& array, const void* host, size_t bytes, const char* what) {
  if (capturing_ && !array.holds(host, bytes)) {
    log_error("CUDA graph capture: {} differ from those staged by begin_step (a copy cannot be recorded); "
              "M2CPP_CUDA_OPTIONS=graphs=off runs without graphs",
              what);
    std::abort();
  }
  return array.upload(host, bytes, stream_);
}

ActCopy CudaBackend::add_rms_norm(Act x, Act y, const Weight& weight, float eps, Act out) {
  bind_device();
  auto timer = timed([&] { return fmt::format("add_rms_norm T={}", x.rows); });
  auto context = [&] {
    return fmt::format("add_rms_norm of {} + {} by {} {} into {}", shape(x), shape(y), dtype_name(weight.dtype),
                       weight.shape.str(), shape(out));
  };
  if (x.rows != y.rows || x.cols != y.cols || out.data == x.data) die(cudaErrorInvalidValue, "add_rms_norm", context(), __FILE__, __LINE__);
  ActCopy copy;
  check(launch_add_rms_norm(x.data, y.data, x.rows, x.cols, device_view(weight, "add_rms_norm"), weight.dtype, eps,
                            out.data, fp8_copy_for(out, &copy), stream_),
        "add_rms_norm", context);
  return copy;
}

void CudaBackend::qkv_proj(Act x, const Linear& wq, const Linear& wk, const Linear& wv, Act q, Act k, Act v,
                           const ActCopy& xc) {
  const DeviceWeight* stack = prepared(wq.prepared, wq.weight, "qkv_proj", "linear").qkv;
  if (!stack) {  // not stacked: three products
    Backend::qkv_proj(x, wq, wk, wv, q, k, v, xc);
    return;
  }
  // The stacked weight in one pass where a GEMV kernel streams it; else three products.
  const MatmulPlan plan = plan_matmul(matmul_shape(x, *stack, q), options_, caps_);
  if (plan.kernel != MatmulKernel::kGemv && plan.kernel != MatmulKernel::kGemvMma) {
    Backend::qkv_proj(x, wq, wk, wv, q, k, v, xc);
    return;
  }
  bind_device();
  auto timer = timed([&] { return fmt::format("qkv_proj T={}", x.rows); });
  const DeviceWeight& d = *stack;
  auto context = [&] {
    return fmt::format("qkv_proj x {} · W {} {} -> q {}, k {}, v {}", shape(x), dtype_name(d.dtype),
                       Shape{d.rows, d.cols}.str(), shape(q), shape(k), shape(v));
  };
  if (x.cols != d.cols || q.cols + k.cols + v.cols != d.rows || q.rows != x.rows || k.rows != x.rows ||
      v.rows != x.rows)
    die(cudaErrorInvalidValue, "qkv_proj", context(), __FILE__, __LINE__);
  MatmulOut out;
  out.y[0] = q.data, out.y[1] = k.data, out.y[2] = v.data;
  out.ld[0] = q.cols, out.ld[1] = k.cols, out.ld[2] = v.cols;
  out.end[0] = q.cols, out.end[1] = q.cols + k.cols;
  check(launch_matmul(plan.kernel, x.data, x.rows, x.cols, d, out, num_sms_, stream_), "qkv_proj", context);
}

}  // namespace cuda
}  // namespace m2
