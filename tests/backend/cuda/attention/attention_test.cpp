// The CUDA attention paths against the CPU backend's attention (itself tested
// against transformers): the prefill kernels (sequences of >=
// kPrefillMinRows rows over BF16/FP8 caches of head_dim 128: FlashInfer's
// Hopper kernel for BF16 caches where built, else our mma.sync one), the decode
// kernels (rows of one-row sequences: SIMT with key splits, or on tensor
// cores for BF16 batches that need no split), the general SIMT kernel (short
// chunks, F32 caches, other head dims) and steps that mix them; and the FP8
// KV store, byte for byte.
//
// Caches are filled through kv_store on both backends from the same random
// K/V, at the slots of shuffled (non-contiguous) block tables, and must agree
// byte for byte before attention runs, so both backends read identical
// caches. Then every (row, q head) output vector is compared.
//
// Bounds, as relative L2 error ‖got − want‖ / ‖want‖:
//   - SIMT kernel: fp32 throughout, only the summation order differs from
//     the CPU (~1e-6); 1e-4 per vector, 2e-5 over the whole output.
//   - Tensor-core kernels (prefill, and decode batches): Q and P are rounded to bf16 (RNE, relative error
//     uniform in ±2^-9, rms 2^-9/√3 ≈ 1.1e-3); K and V are exact (BF16
//     caches; FP8 codes convert to bf16 exactly and their scales stay fp32).
//     Q's rounding moves a logit by ~1.1e-3 · |q|·|k|·scale (~1 for
//     unit-normal q, k and scale 1/√128), P's moves each term of P V by
//     ~1.1e-3: the output moves by ~1.6e-3 of its norm. Bounds: 12 · 2^-9
//     (2.3e-2) per vector and 4 · 2^-9 (7.8e-3) overall, times q_scale when
//     q is drawn larger (the logit error grows with |q|). A wrong fragment,
//     mask or gather moves outputs by O(1) (or by 1/position for a mask off
//     by one; the first rows of each case catch that).
#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <numeric>

#include "backend/cuda/attention/attention.h"
#include "backend/cuda/attention/attention_plan.h"
#include "backend/cuda/attention/attention_prefill.h"
#include "../cuda_test_util.h"

namespace m2::test {
namespace {

struct SeqSpec {
  int64_t context, rows;  // rows of the step end at position context - 1
};

struct AttnSpec {
  int heads, kv_heads, hd, block_size;
  DType dtype;
  std::vector<SeqSpec> seqs;
  float q_scale = 1.0f;
};

std::string describe(const AttnSpec& c) {
  std::string s = fmt::format("{} cache, {}/{} heads x {}, block {}, q scale {}, seqs (context, rows):", dtype_name(c.dtype),
                              c.heads, c.kv_heads, c.hd, c.block_size, c.q_scale);
  for (const SeqSpec& q : c.seqs) s += fmt::format(" ({}, {})", q.context, q.rows);
  return s;
}

// Where byte `off` of one layer's cache storage lies (K codes, V codes, K
// scales, V scales; KvCache's layout with num_layers = 1).
std::string locate(const KvCacheShape& s, size_t off) {
  const size_t codes = static_cast<size_t>(s.num_blocks * s.block_bytes());
  const size_t esz = dtype_size(s.dtype);
  if (off < 2 * codes) {
    const int64_t e = static_cast<int64_t>((off % codes) / esz);
    const int64_t slot = e / s.token_elems();
    return fmt::format("{} codes: slot {} (block {}, offset {}), kv head {}, dim {}", off < codes ? "K" : "V", slot,
                       slot / s.block_size, slot % s.block_size, (e % s.token_elems()) / s.head_dim, e % s.head_dim);
  }
  const size_t i = (off - 2 * codes) % static_cast<size_t>(s.scale_bytes()) / 4;
  return fmt::format("{} scale: slot {}, kv head {}", off - 2 * codes < static_cast<size_t>(s.scale_bytes()) ? "K" : "V",
                     i / s.num_kv_heads, i % s.num_kv_heads);
}

class CudaAttention : public CudaTest {
 protected:
  // Fills both caches, checks them equal, runs attention on both, compares;
  // returns the number of decode rows the tensor-core decode kernel ran.
  int64_t run(const AttnSpec& c, uint64_t seed);
  // Expects the two backends' cache storage identical; names the first
  // differing bytes.
  void expect_same_cache(const KvCacheShape& shape, const KvCache& gcache, const KvCache& ccache,
                         const std::string& what);
  // The backend's kernel for decode rows whose keys are split (set with
  // CudaOptions::split_decode when a test makes its own backend).
  cuda::SplitDecode split_decode_ = cuda::SplitDecode::kAuto;
  void use_split_decode(cuda::SplitDecode mode) {
    cuda::CudaOptions o = test_options();
    o.split_decode = mode;
    gpu_ = make_cuda_backend(0, o);
    ASSERT_TRUE(gpu_);
    split_decode_ = mode;
  }
};

void CudaAttention::expect_same_cache(const KvCacheShape& shape, const KvCache& gcache, const KvCache& ccache,
                                      const std::string& what) {
  std::vector<uint8_t> got(KvCache::storage_bytes(shape));
  gpu_->copy_to_host(gcache.k_base(0), got.data(), got.size());
  const auto* want = static_cast<const uint8_t*>(ccache.k_base(0));
  int reported = 0;
  size_t differing = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (got[i] == want[i]) continue;
    ++differing;
    if (reported++ < 8)
      ADD_FAILURE() << "kv_store differs at " << locate(shape, i) << ": GPU byte 0x" << std::hex << int(got[i])
                    << ", CPU 0x" << int(want[i]) << std::dec << " (" << what << ")";
  }
  EXPECT_EQ(differing, 0u) << "bytes of the GPU cache that differ from the CPU's (" << what << ")";
}

int64_t CudaAttention::run(const AttnSpec& c, uint64_t seed) {
  SCOPED_TRACE(describe(c));
  HostTensors h(seed);
  Backend& gpu = *gpu_;
  Backend& cpu = *cpu_;
  std::vector<std::pair<int64_t, int64_t>> seqs;
  for (const SeqSpec& q : c.seqs) seqs.emplace_back(q.context, q.rows);
  const PagedKv kv = paged_kv(h, c.kv_heads, c.hd, c.block_size, c.dtype, seqs);
  const KvCacheShape& shape = kv.shape;
  const KvCache &gcache = kv.gpu, &ccache = kv.cpu;
  const std::vector<SeqSlice>& slices = kv.slices;
  const int64_t rows = kv.rows;
  expect_same_cache(shape, gcache, ccache, "random K/V");

  const int64_t cols = static_cast<int64_t>(c.heads) * c.hd;
  auto q = h.randn(rows * cols, c.q_scale);
  Act out = poisoned(rows, cols);
  const float scale = 1.0f / std::sqrt(float(c.hd));
  gpu.attention(to_gpu(q, rows), gcache, 0, slices, c.heads, scale, out);
  std::vector<float> want(rows * cols);
  cpu.attention(host_act(q, rows), ccache, 0, slices, c.heads, scale, host_act(want, rows));
  const std::vector<float> got = to_host(out);

  // Per sequence: which kernel ran it, and its bounds. One-row sequences go
  // to the decode kernels, on tensor cores when they need no key split (the
  // backend's rule, attention_splits, on this GPU's SMs).
  const int G = c.heads / c.kv_heads;
  int64_t decode_rows = 0, decode_keys = 0;
  for (const SeqSpec& q : c.seqs)
    if (q.rows == 1 && cuda::attention_decode_supports(c.dtype, c.hd, G))
      ++decode_rows, decode_keys = std::max(decode_keys, q.context);
  const bool tc_decode =
      decode_rows > 0 &&
      cuda::attention_decode_on_mma(
          c.dtype, c.hd, G, cuda::attention_splits(decode_rows * c.kv_heads, decode_keys, num_sms(), cuda::kDecodeTileKeys),
          split_decode_);
  const double tc_factor = std::max(1.0f, c.q_scale);
  double err2[2] = {0, 0}, ref2[2] = {0, 0};  // [0]: SIMT rows, [1]: tensor-core rows
  int reported = 0;
  for (size_t i = 0; i < c.seqs.size(); ++i) {
    const bool tc = (cuda::attention_prefill_supports(c.dtype, c.hd) && c.seqs[i].rows >= cuda::kPrefillMinRows) ||
                    (tc_decode && c.seqs[i].rows == 1);
    const double bound = tc ? 12.0 / 512 * tc_factor : 1e-4;
    for (int64_t r = 0; r < c.seqs[i].rows; ++r) {
      for (int hh = 0; hh < c.heads; ++hh) {
        const size_t base = static_cast<size_t>((slices[i].first_row + r) * cols + hh * c.hd);
        double e2 = 0, w2 = 0, worst = -1;
        int worst_d = 0;
        for (int d = 0; d < c.hd; ++d) {
          const double g = got[base + d], w = want[base + d];
          const double diff = std::isfinite(g) ? std::abs(g - w) : std::numeric_limits<double>::infinity();
          e2 += diff * diff, w2 += w * w;
          if (diff > worst) worst = diff, worst_d = d;
        }
        err2[tc] += e2, ref2[tc] += w2;
        const double rel = std::sqrt(e2 / std::max(w2, 1e-300));
        if (!(rel <= bound) && reported++ < 10)
          ADD_FAILURE() << (tc ? "tensor-core" : "SIMT") << " attention: seq " << i << " row " << r << " (position "
                        << c.seqs[i].context - c.seqs[i].rows + r << ") head " << hh << " (kv head "
                        << hh / (c.heads / c.kv_heads) << "): relative error " << rel << " > " << bound
                        << "; worst dim " << worst_d << ": GPU " << got[base + worst_d] << ", CPU "
                        << want[base + worst_d];
      }
    }
  }
  if (ref2[0] > 0) {
    EXPECT_LE(std::sqrt(err2[0] / ref2[0]), 2e-5) << "SIMT rows overall";
  }
  if (ref2[1] > 0) {
    EXPECT_LE(std::sqrt(err2[1] / ref2[1]), 4.0 / 512 * tc_factor) << "tensor-core rows overall";
  }
  return tc_decode ? decode_rows : 0;
}

constexpr int kH = 48, kKv = 8, kHd = 128;  // MiniMax-M2

// Fresh prefills of every size around the dispatch threshold (15: SIMT, 16:
// tensor cores) and the 128-vector items (17 rows = 102 vectors, 100 rows =
// 4.7 items, 1000 rows = 46.9 items).
TEST_F(CudaAttention, PrefillMatchesCpu) {
  for (DType dt : {DType::kBF16, DType::kF8E4M3, DType::kF32})
    for (int64_t n : {1, 15, 16, 17, 100, 1000}) run({kH, kKv, kHd, 16, dt, {{n, n}}}, 100 + n);
}

// Where FlashInfer's kernel takes the cases above (flashinfer_prefill.h), our
// mma.sync kernel too (attn_prefill=mma: builds or GPUs without
// FlashInfer's); and FlashInfer's over blocks of 12 (pages not a power of
// two) with chunks of long contexts beside decode and short rows.
TEST_F(CudaAttention, PrefillOnMmaSyncMatchesCpu) {
  gpu_ = make_cuda_backend(0, test_options("attn_prefill=mma"));
  ASSERT_TRUE(gpu_);
  for (DType dt : {DType::kBF16, DType::kF8E4M3}) {
    for (int64_t n : {16, 17, 100, 1000}) run({kH, kKv, kHd, 16, dt, {{n, n}}}, 150 + n);
    run({kH, kKv, kHd, 16, dt, {{3000, 200}, {700, 200}, {1024, 1}}}, 160);
  }
}

TEST_F(CudaAttention, PrefillChunksOverOddBlocksMatchCpu) {
  for (DType dt : {DType::kBF16, DType::kF8E4M3}) {
    run({kH, kKv, kHd, 12, dt, {{3000, 200}, {700, 200}, {1024, 1}, {50, 5}, {129, 129}}}, 170);
    run({16, 2, 128, 12, dt, {{2000, 1000}, {17, 16}}}, 171);
  }
}

TEST_F(CudaAttention, Prefill4096RowsMatchesCpu) {
  for (DType dt : {DType::kBF16, DType::kF8E4M3}) run({kH, kKv, kHd, 16, dt, {{4096, 4096}}}, 200);
}

// Chunked prefill: the rows attend to every cached key before the chunk
// plus causally within it.
TEST_F(CudaAttention, ChunkedPrefillMatchesCpu) {
  for (DType dt : {DType::kBF16, DType::kF8E4M3}) {
    run({kH, kKv, kHd, 16, dt, {{3000, 200}}}, 300);
    run({kH, kKv, kHd, 16, dt, {{1000, 17}, {5000, 640}, {129, 64}}}, 301);
  }
}

// One step with prefill chunks (tensor cores) and decode rows and a short
// chunk (SIMT, split over the keys) over one cache.
TEST_F(CudaAttention, MixedStepMatchesCpu) {
  for (DType dt : {DType::kBF16, DType::kF8E4M3, DType::kF32})
    run({kH, kKv, kHd, 16, dt, {{700, 200}, {1024, 1}, {3000, 1}, {5, 5}, {64, 16}, {2048, 3}}}, 400);
}

// A decode batch: one row per sequence (the decode kernels), contexts around
// the 64-key tiles and splits, one key, and a batch large enough to need no
// split; GQA 8:1 (the largest group) and 12:1 (the general kernel). Split
// rows on the backend's choice, then all on the SIMT kernel, then all on the
// tensor-core one.
// (with_unsplit: also a batch of 300, which needs no split: the same kernel
// whatever the split rule.)
void decode_batches(const std::function<int64_t(const AttnSpec&, uint64_t)>& run, bool with_unsplit) {
  for (DType dt : {DType::kBF16, DType::kF8E4M3}) {
    std::vector<SeqSpec> seqs;
    for (int64_t n : {1, 2, 63, 64, 65, 127, 128, 129, 1000, 1024, 1025, 2900}) seqs.push_back({n, 1});
    run({kH, kKv, kHd, 16, dt, seqs}, 450);
    if (with_unsplit) {
      seqs.clear();
      for (int i = 0; i < 300; ++i) seqs.push_back({1 + (i * 7919) % 700, 1});
      run({kH, kKv, kHd, 16, dt, seqs}, 451);
    }
    run({16, 2, 128, 16, dt, {{500, 1}, {64, 1}, {3, 1}}}, 452);
    run({24, 2, 128, 16, dt, {{500, 1}, {64, 1}}}, 453);
    run({kH, kKv, kHd, 12, dt, {{20000, 1}}, 4.0f}, 454);  // a long context, a sharp softmax, blocks of 12
  }
}
TEST_F(CudaAttention, DecodeBatchMatchesCpu) {
  decode_batches([&](const AttnSpec& c, uint64_t seed) { return run(c, seed); }, true);
}
TEST_F(CudaAttention, DecodeBatchOnSimtMatchesCpu) {
  use_split_decode(cuda::SplitDecode::kSimt);
  decode_batches([&](const AttnSpec& c, uint64_t seed) { return run(c, seed); }, false);
}
TEST_F(CudaAttention, DecodeBatchOnTensorCoresWithSplitsMatchesCpu) {
  use_split_decode(cuda::SplitDecode::kMma);
  decode_batches([&](const AttnSpec& c, uint64_t seed) { return run(c, seed); }, false);
}

// Decode batches that need no key split, on tensor cores: contexts around
// the 16-key warp slices and 64-key tiles (one key: three warps see none),
// long ones, GQA 6:1 and 8:1, blocks of 16 and of 12 (not a power of two),
// a sharper softmax, BF16 and FP8 caches.
TEST_F(CudaAttention, DecodeBatchOnTensorCoresMatchesCpu) {
  std::vector<SeqSpec> seqs;
  const int64_t edges[] = {1, 2, 15, 16, 17, 31, 32, 33, 48, 49, 63, 64, 65, 127, 128, 129, 191, 192, 193, 1000, 4097};
  for (int i = 0; i < 64; ++i) seqs.push_back({i < 21 ? edges[i] : 1 + (i * 7919) % 3000, 1});
  EXPECT_EQ(run({kH, kKv, kHd, 16, DType::kBF16, seqs}, 460), 64);
  EXPECT_EQ(run({kH, kKv, kHd, 16, DType::kBF16, seqs, 4.0f}, 461), 64);
  EXPECT_EQ(run({kH, kKv, kHd, 16, DType::kF8E4M3, seqs}, 462), 64);
  EXPECT_EQ(run({kH, kKv, kHd, 16, DType::kF8E4M3, seqs, 4.0f}, 464), 64);
  std::vector<SeqSpec> group8;
  for (int i = 0; i < 200; ++i) group8.push_back({1 + (i * 4481) % 900, 1});
  EXPECT_EQ(run({16, 2, 128, 12, DType::kBF16, group8}, 463), 200);
  EXPECT_EQ(run({16, 2, 128, 12, DType::kF8E4M3, group8}, 465), 200);
}

// Sharper softmax (logits of std 4): the online max and rescaling matter.
TEST_F(CudaAttention, PeakySoftmaxMatchesCpu) {
  for (DType dt : {DType::kBF16, DType::kF8E4M3}) run({kH, kKv, kHd, 16, dt, {{600, 600}, {900, 1}}, 4.0f}, 500);
}

// Other shapes: GQA 4:1 and 1:1 at head_dim 128 with blocks of 4, 12 (not a
// power of two: the general gather) and 128 (larger than a key tile); head
// dims 64 go to the SIMT kernel.
TEST_F(CudaAttention, SmallConfigsMatchCpu) {
  for (DType dt : {DType::kBF16, DType::kF8E4M3}) {
    run({8, 2, 128, 4, dt, {{90, 90}, {33, 1}, {300, 40}}}, 600);
    run({8, 2, 128, 12, dt, {{250, 250}, {77, 20}}}, 601);
    run({4, 4, 128, 128, dt, {{400, 400}, {500, 1}}}, 602);
    run({4, 2, 64, 4, dt, {{90, 90}, {333, 1}}}, 603);
  }
}

// FP8 decode with split keys at long context, and a chunk at the end of it.
TEST_F(CudaAttention, Fp8At32KContextMatchesCpu) { run({kH, kKv, kHd, 16, DType::kF8E4M3, {{32768, 1}, {32800, 64}}}, 700); }

// kv_store into an FP8 cache produces the CPU backend's bytes (codes and
// scales) for heads of very different magnitudes, an all-zero head (scale
// 1), signed zeros, values whose quotient by the scale is exactly halfway
// between two e4m3 codes (round to even), subnormal codes and the
// saturating maximum.
TEST_F(CudaAttention, Fp8KvStoreIsBitIdenticalToCpu) {
  HostTensors h(800);
  const int kv_heads = 8, hd = 128, bs = 16;
  const int64_t T = 40;
  KvCacheShape shape{1, kv_heads, hd, bs, 4, DType::kF8E4M3};
  KvCache gcache(shape, gpu_->allocate(KvCache::storage_bytes(shape)));
  KvCache ccache(shape, cpu_->allocate(KvCache::storage_bytes(shape)));
  const std::vector<uint8_t> zeros(KvCache::storage_bytes(shape), 0);
  gpu_->copy_from_host(zeros.data(), gcache.k_base(0), zeros.size());
  std::memcpy(ccache.k_base(0), zeros.data(), zeros.size());
  // Exact midpoints between codes at scale 1 (amax 448), rounding to the
  // even code: 1.0625 -> 1, 1.1875 -> 1.25, 2^-10 -> 0, 3 * 2^-10 -> 2^-8,
  // 9 * 2^-10 -> 2^-7 (subnormals), 272 -> 256.
  const float ties[] = {1.0625f, 1.1875f, 0.0009765625f, 0.0029296875f, 0.0087890625f, -1.0625f, -0.0009765625f, 272.0f};
  auto make = [&](std::vector<float>& x) {
    x = h.randn(T * kv_heads * hd);
    for (int64_t t = 0; t < T; ++t) {
      for (int hh = 0; hh < kv_heads; ++hh) {
        float* r = x.data() + (t * kv_heads + hh) * hd;
        switch ((t + hh) % 5) {
          case 0: std::fill(r, r + hd, 0.0f); break;                   // all zero: scale 1
          case 1: for (int d = 0; d < hd; ++d) r[d] *= 1e-3f; break;    // small
          case 2: for (int d = 0; d < hd; ++d) r[d] *= 300.0f; break;   // large
          case 3:                                                       // amax 448: scale exactly 1
            for (int d = 0; d < hd; ++d) r[d] = ties[d % 8] * (d % 16 < 8 ? 1.0f : 0.5f);
            r[0] = 448.0f, r[1] = -0.0f;
            break;
          default: r[5] = -0.0f; break;  // unit normal with a signed zero
        }
      }
    }
  };
  std::vector<float> k, v;
  make(k);
  make(v);
  std::vector<int64_t> slots(T);
  std::iota(slots.begin(), slots.end(), 0);
  std::shuffle(slots.begin(), slots.end(), h.rng());
  for (int64_t& s : slots) s += s >= 20 ? 4 : 0;  // slots 20..23 stay unwritten (zero in both)
  gpu_->kv_store(gcache, 0, to_gpu(k, T), to_gpu(v, T), slots);
  cpu_->kv_store(ccache, 0, host_act(k, T), host_act(v, T), slots);
  expect_same_cache(shape, gcache, ccache, "magnitudes, zeros, ties, saturation");
}

}  // namespace
}  // namespace m2::test
