// Host-callable launchers of the CUDA kernels. Plain C++ (no device code):
// the backend (cuda_backend.cpp) validates shapes and calls these; each
// returns the launch's cudaError_t for the caller to check with context.
// Activations are fp32, row-major; pointers are device pointers unless named
// `host`.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "model/dummy_values.h"
#include "tensor/dtype.h"

namespace m2::cuda {

// FP8 weights carry one fp32 scale per kFp8Block x kFp8Block block.
constexpr int kFp8Block = 128;

// A weight matrix [rows, cols] in device memory in its stored dtype. FP8
// weights carry fp32 128 x 128 block scales [ceil(rows/128), scale_ld]:
// W = W8 x scales[r / 128, c / 128].
struct DeviceWeight {
  const uint8_t* data = nullptr;
  const float* scales = nullptr;
  DType dtype = DType::kF32;
  int64_t rows = 0;
  int64_t cols = 0;
  int64_t scale_ld = 0;
};

// The experts of one MoE layer, stacked: expert e's w1 (gate, [I, H]) starts
// at w1 + e * stride13 bytes and, for FP8, its scales at scale_off13 bytes
// further; w3 (up, [I, H]) likewise; w2 (down, [H, I]) with stride2 and
// scale_off2.
struct DeviceExperts {
  DType dtype = DType::kF8E4M3;
  int64_t num_experts = 0;
  int64_t hidden = 0;        // H
  int64_t intermediate = 0;  // I
  const uint8_t* w1 = nullptr;
  const uint8_t* w3 = nullptr;
  const uint8_t* w2 = nullptr;
  int64_t stride13 = 0, scale_off13 = 0;
  int64_t stride2 = 0, scale_off2 = 0;
};

// An optional FP8 copy of an fp32 activation [T, K] that its producer kernel
// writes beside it (null q: none): codes q [T, K] e4m3 and scales
// s [K / 128, T] (s[kb * T + t]), exactly what launch_quantize_fp8
// (fp8_gemm.h) writes from the fp32 output, so that the FP8 products reading
// the activation skip that kernel. K a multiple of 128, q 4-byte aligned.
struct Fp8Out {
  uint8_t* q = nullptr;
  float* s = nullptr;
};

// ---- bf16_convert.cu ----------------------------------------------------------
// y = bf16(x) (RNE) of n floats (n a multiple of 4, x 16-byte and y 8-byte aligned).
cudaError_t launch_f32_to_bf16(const float* x, int64_t n, void* y, cudaStream_t stream);
// out = float(o) for a bf16 [T, cols] (cols a multiple of 128); with out8.q
// also out's FP8 copy, as every FP8 producer writes it.
cudaError_t launch_bf16_to_f32(const void* o, int64_t T, int64_t cols, float* out, Fp8Out out8, cudaStream_t stream);
// out[i] = bf16(code x scale) of FP8 cache pages pages[0..n_pages): out is
// [n_pages, block_size, kv_heads, head_dim] (head_dim 128), cache and scales
// one layer's K (or V) codes [blocks, block_size, kv_heads, head_dim] and
// scales [blocks, block_size, kv_heads].
cudaError_t launch_fp8_pages_to_bf16(const uint8_t* cache, const float* scales, const int32_t* pages, int64_t n_pages,
                                     int block_size, int kv_heads, int head_dim, void* out, cudaStream_t stream);

// ---- elementwise.cu ----------------------------------------------------------
// out[i, :] = table[ids[i], :] as fp32; table [V, H].
cudaError_t launch_embed(const void* table, DType dtype, int64_t H, const int32_t* ids, int64_t T, float* out,
                         cudaStream_t stream);
// out = x / rms(x) * w per row of n (fp64 statistics); out may be x. With
// out8.q: also out's FP8 copy (n a multiple of 128, out 16-byte aligned).
cudaError_t launch_rms_norm(const float* x, int64_t rows, int64_t n, const void* w, DType w_dtype, float eps,
                            float* out, Fp8Out out8, cudaStream_t stream);
// x += y, then out = rms_norm(x) as above (x updated in place; out != x).
cudaError_t launch_add_rms_norm(float* x, const float* y, int64_t rows, int64_t n, const void* w, DType w_dtype,
                                float eps, float* out, Fp8Out out8, cudaStream_t stream);
// x[i] += y[i] for i < n.
cudaError_t launch_add(float* x, const float* y, int64_t n, cudaStream_t stream);
// out[i, :] = x[rows[i], :], rows of `cols` floats.
cudaError_t launch_gather_rows(const float* x, int64_t cols, const int64_t* rows, int64_t n_rows, float* out,
                               cudaStream_t stream);
// Rows t < T of k and v ([T, kv_heads * head_dim], fp32) to the cache slots
// slots[t] (cache rows of kv_heads * head_dim elements of `dtype`). F32, BF16:
// RNE. F8_E4M3: per (token, kv head) scale = amax / 448 (1 if all zero) to
// k_scales / v_scales [slot * kv_heads + head], codes e4m3(x / scale) (RNE,
// saturating), the CPU backend's bytes exactly.
cudaError_t launch_kv_store(const float* k, const float* v, int64_t T, const int64_t* slots, int kv_heads,
                            int head_dim, void* k_cache, void* v_cache, float* k_scales, float* v_scales, DType dtype,
                            cudaStream_t stream);

// ---- qk_norm_rope.cu ----------------------------------------------------------
constexpr int kQkMaxHalfRotary = 64;
struct QkNormRopeArgs {
  float* q = nullptr;  // [T, q_dim]
  float* k = nullptr;  // [T, kv_dim]
  int64_t T = 0, q_dim = 0, kv_dim = 0;
  const void* q_norm = nullptr;  // [q_dim] or null (no norm)
  const void* k_norm = nullptr;  // [kv_dim] or null
  DType q_norm_dtype = DType::kF32, k_norm_dtype = DType::kF32;
  // Widths the mean of squares is taken over: q_dim and kv_dim on one GPU,
  // the full widths when q/k are head shards of a tensor-parallel group.
  int64_t q_norm_width = 0, kv_norm_width = 0;
  float eps = 1e-6f;
  const int32_t* positions = nullptr;  // [T]
  int head_dim = 0, rotary_dim = 0;
  double inv_freq[kQkMaxHalfRotary] = {};  // theta^(-2i / rotary_dim), i < rotary_dim / 2
  // Optional fused KV store (slots null: none): rotated k and v [T, kv_dim]
  // to cache rows of kv_dim elements of cache_dtype (F32, BF16 or F8_E4M3) at
  // slots[t], with launch_kv_store's conversions and bytes; F8_E4M3 also
  // writes the per (token, kv head) scales [slot * kv_heads + head]
  // (kv_heads = kv_dim / head_dim) to k_scales / v_scales.
  const float* v = nullptr;
  const int64_t* slots = nullptr;
  void* k_cache = nullptr;
  void* v_cache = nullptr;
  float* k_scales = nullptr;
  float* v_scales = nullptr;
  DType cache_dtype = DType::kBF16;
};
cudaError_t launch_qk_norm_rope(const QkNormRopeArgs& a, cudaStream_t stream);

// ---- matmul.cu ----------------------------------------------------------------
// Up to this many tokens a product streams its weights once (GEMV core).
constexpr int64_t kGemvMaxTokens = 16;
// Outputs of a product whose weight rows are several matrices stacked (q|k|v):
// rows [0, end[0]) go to y[0], [end[0], end[1]) to y[1], the rest to y[2],
// each at its own row stride, columns counted from the segment's first row.
struct MatmulOut {
  float* y[3] = {};
  int64_t ld[3] = {};
  int64_t end[2] = {};
};
// Whether FP8 decode products run on tensor cores (gemv_mma.cuh), not on the
// SIMT GEMV core. Process-wide: M2CPP_GEMV_MMA=off sets it false at start;
// benchmarks flip it to compare the two.
bool& gemv_mma_enabled();
// The GEMV path of launch_matmul into split outputs: T <= kGemvMaxTokens,
// FP8 or BF16 weights (cudaErrorInvalidValue otherwise).
cudaError_t launch_matmul_split(const float* x, int64_t T, int64_t ldx, const DeviceWeight& w, const MatmulOut& y,
                                int num_sms, cudaStream_t stream);
// y[t, :] = x[t, :] · Wᵀ for t < T (x row stride ldx, y row stride ldy).
// Few tokens stream W once at memory speed (GEMV); many go to a tiled kernel.
cudaError_t launch_matmul(const float* x, int64_t T, int64_t ldx, const DeviceWeight& w, float* y, int64_t ldy,
                          int num_sms, cudaStream_t stream);

// ---- route.cu -----------------------------------------------------------------
struct RouteArgs {
  const float* x = nullptr;  // [T, H]
  int64_t T = 0;
  DeviceWeight gate;              // [E, H], F32 or BF16
  const void* bias = nullptr;     // [E] or null
  DType bias_dtype = DType::kF32;
  int top_k = 0;
  float scaling = 1.0f;
  float* logits = nullptr;        // scratch [T, E]
  unsigned* counters = nullptr;   // scratch [ceil(T / 4)], zero (the kernel leaves them zero)
  int32_t* expert_ids = nullptr;  // [T, top_k]
  float* weights = nullptr;       // [T, top_k]
};
cudaError_t launch_route(const RouteArgs& a, int num_sms, cudaStream_t stream);
// The selection of launch_route alone, from a.logits [T, E] written before
// (a GEMM: route_gemm.h); a.counters is not used.
cudaError_t launch_route_select(const RouteArgs& a, cudaStream_t stream);
// Elements of `counters` launch_route needs for T tokens.
int64_t route_counter_count(int64_t T);

// ---- moe.cu -------------------------------------------------------------------
// Up to this many (token, expert) pairs launch_moe takes the decode path (no
// grouping: each pair's expert weights streamed by its own blocks,
// moe_decode.cu).
constexpr int64_t kMoeDecodePairs = 64;
// Experts per token launch_moe takes.
constexpr int kMoeMaxTopK = 16;

struct MoeArgs {
  const float* x = nullptr;  // [T, H]
  int64_t T = 0;
  DeviceExperts experts;
  const int32_t* expert_ids = nullptr;  // [T, top_k]
  const float* weights = nullptr;       // [T, top_k]
  int top_k = 0;
  float* out = nullptr;  // [T, H]
  // Scratch from moe_scratch_bytes(): activations of the experts and, for
  // more than a few tokens, the grouping of (token, slot) pairs by expert.
  void* scratch = nullptr;
  // Grouped path of FP8 experts with dimensions in multiples of 128 on
  // tensor cores with FP8 activations (moe_fp8.cu); false: fp32 SIMT tiles.
  bool fp8_tensor_cores = true;
  // With fp8_tensor_cores: that grouped path's GEMMs on CUTLASS instead
  // (moe_cutlass.h; builds with M2CPP_WITH_CUTLASS, sm_90 devices only:
  // device_caps.h). The scratch must be sized with the same flag.
  bool use_cutlass = false;
  int num_sms = 0;  // of the device (CUTLASS's persistent grid, the decode path's grid; 0: asked of the device)
  // Decode (at most kMoeDecodePairs pairs) of FP8 experts with dimensions in
  // multiples of 128: W2 on tensor cores (wgmma, moe_decode_wgmma.cu; sm_90a
  // code on an sm_90 device: CudaFeatures::wgmma) instead of the SIMT
  // streaming kernel, same accuracy. Needs `counters`:
  // moe_decode_counter_count() zeros, which the kernel leaves zero.
  bool wgmma_decode = false;
  unsigned* counters = nullptr;
  // x's FP8 copy written by its producer (Fp8Out's layout: codes [T, H],
  // scales [H / 128, T]), or null: the FP8 paths quantise x into their
  // scratch themselves.
  const uint8_t* x8 = nullptr;
  const float* sx = nullptr;
};
size_t moe_scratch_bytes(int64_t T, int top_k, int64_t hidden, int64_t intermediate, int64_t num_experts,
                         bool cutlass);
int64_t moe_decode_counter_count(int64_t T, int64_t hidden);
// Whether launch_moe takes a grouped FP8 path (tensor cores: more than 64
// pairs, FP8 experts of dimensions in multiples of 128, fp8_tensor_cores),
// the paths that quantise x or read x8.
bool moe_reads_x8(const MoeArgs& a);
// For those paths: leaves a.x8, a.sx as they are when x's producer set them,
// else quantises x into (x8, sx) (launch_quantize_fp8) and points a at them.
cudaError_t moe_quantize_x(MoeArgs& a, uint8_t* x8, float* sx, cudaStream_t stream);
cudaError_t launch_moe(const MoeArgs& a, cudaStream_t stream);

// ---- attention.cu -------------------------------------------------------------
// One sequence of the step, as the attention kernel reads it.
struct AttnSeq {
  int32_t first_row = 0;
  int32_t num_rows = 0;
  int32_t context_len = 0;
  int32_t table_offset = 0;  // of its block table in AttentionArgs::block_tables
};
// A unit of work: up to 8 consecutive (row, q head) vectors of one sequence
// that share a kv head.
struct AttnItem {
  int32_t seq = 0;
  int32_t first_vector = 0;  // vector v = row_in_seq * group + head_in_group
};
struct AttentionArgs {
  const float* q = nullptr;  // [T, heads * head_dim]
  float* out = nullptr;      // [T, heads * head_dim]
  int64_t T = 0;
  const void* k_cache = nullptr;  // [blocks, block_size, kv_heads, head_dim]
  const void* v_cache = nullptr;
  const float* k_scales = nullptr;  // F8_E4M3: [blocks, block_size, kv_heads]; x = code * scale
  const float* v_scales = nullptr;
  DType dtype = DType::kBF16;  // F32, BF16 or F8_E4M3
  int block_size = 0, kv_heads = 0, head_dim = 0, group = 0;
  float scale = 0;
  const AttnSeq* seqs = nullptr;
  const AttnItem* items = nullptr;
  int64_t num_items = 0;
  const int32_t* block_tables = nullptr;
  // Split of each item's keys over `splits` blocks of `split_keys` keys; with
  // more than one, partial results go to `partials` (attention_partial_floats)
  // and a second kernel merges them (the decode kernel: the last block of an
  // item merges, counting finished splits in `counters`, one per item and kv
  // head, zero between launches).
  int splits = 1;
  int split_keys = 0;
  float* partials = nullptr;
  unsigned* counters = nullptr;
  // The prefill kernel only, when it writes every row of out: out's FP8
  // copy (one 128-channel group = one head of head_dim 128).
  Fp8Out out8;
};
constexpr int kAttnVectors = 8;  // (row, head) vectors per item
constexpr int kAttnMaxHeadDim = 128;
size_t attention_partial_floats(int64_t T, int heads, int head_dim, int splits);
cudaError_t launch_attention(const AttentionArgs& a, cudaStream_t stream);

// ---- attention_decode.cu --------------------------------------------------------
// Decode rows (sequences of num_rows 1): block x takes seqs[x] (num_items of
// them; `items` is not read: one load less in the kernel's chain of
// dependent loads), head_dim 128, group <= 8, BF16 or FP8 caches; split_keys
// a multiple of kDecodeTileKeys.
constexpr int kDecodeHeadDim = 128;
constexpr int kDecodeMaxGroup = 8;
constexpr int kDecodeTileKeys = 64;
bool attention_decode_supports(DType dtype, int head_dim, int group);
size_t attention_decode_partial_floats(int64_t seqs, int kv_heads, int splits);
cudaError_t launch_attention_decode(const AttentionArgs& a, cudaStream_t stream);
// The key split of attention work of `blocks` (item, kv head) blocks whose
// longest sequence has max_keys keys on a GPU of num_sms SMs: splits when the
// blocks would leave it idle (about two blocks per SM), each split a
// multiple of `granule` keys. The backend's rule; the tests predict its
// kernel choice by it.
struct AttentionSplits {
  int splits = 1;
  int split_keys = 0;
};
AttentionSplits attention_splits(int64_t blocks, int64_t max_keys, int num_sms, int granule);

// ---- attention_decode_mma.cu ----------------------------------------------------
// Decode rows on tensor cores (bf16 Q and P, fp32 softmax and sums): BF16
// and FP8 caches, head_dim 128, group <= 8, keys split as the SIMT kernel's
// (same records and merge, attention_split_merge.cuh).
bool attention_decode_mma_supports(DType dtype, int head_dim, int group);
cudaError_t launch_attention_decode_mma(const AttentionArgs& a, cudaStream_t stream);
// Which decode kernel the backend runs for a split `sp` (unless
// M2CPP_CUDA_TC_ATTENTION=0, or M2CPP_ATTN_DECODE_SPLIT=simt|mma for split
// steps): tensor cores without a split (batches), and for splits of at least
// kDecodeMmaMinSplitKeys keys (long contexts: a pipeline of tiles per block;
// one or two tiles a block are the SIMT kernel's, whose 8 warps shorten the
// chain of a batch-1 step at short contexts).
constexpr int kDecodeMmaMinSplitKeys = 256;
enum class SplitDecode { kAuto, kSimt, kMma };
bool attention_decode_on_mma(DType dtype, int head_dim, int group, const AttentionSplits& sp, SplitDecode mode);

// cudaSuccess if this build has kernels for the current device; *arch: the
// architecture they were compiled for (__CUDA_ARCH__ / 10), below the
// device's own when it JIT-compiles a PTX entry of an older one.
cudaError_t kernels_loadable(int* arch);

// ---- device_caps.cpp ----------------------------------------------------------
// Whether kernels launched now on the current device may start early
// (programmatic dependent launch): only sm_90 code has the griddepcontrol.wait
// that keeps such a kernel from reading what the one before has not written.
bool current_device_has_pdl();
// Logs that a kernel asked the current device for `bytes` of shared memory a
// block and was refused, with the device's limit (99 KiB on sm_86/sm_89, 163
// on sm_80, 227 on sm_90): the failing op then stops naming itself.
void log_smem_refused(size_t bytes);

// ---- roofline.cu --------------------------------------------------------------
// Device-to-device copy bandwidth in bytes/s (bytes read + bytes written) of
// a buffer much larger than L2.
cudaError_t measure_copy_bandwidth(size_t bytes, double* bytes_per_second);
// Keeps `stream` busy for `seconds` (benchmarks queue the launches they time
// behind it, so that host launch overhead stays out of the GPU's timeline).
cudaError_t launch_gpu_delay(cudaStream_t stream, double seconds);
// cuBLASLt dense GEMM throughput (FLOP/s) at 8192^3 with BF16 or F8_E4M3
// inputs, fp32 accumulation.
cudaError_t measure_gemm_flops(DType input, double* flops);

// ---- dummy_fill.cu: --load-format dummy's FP8 weights generated on the GPU
// (model/dummy_values.h): elements [first, first + n) of the tensor with
// `seed`, element `first` at dst; the host fill's exact bytes.
cudaError_t launch_fill_dummy_fp8(uint8_t* dst, int64_t first, int64_t n, uint64_t seed, const DummyFp8Table& table,
                                  cudaStream_t stream);

}  // namespace m2::cuda
