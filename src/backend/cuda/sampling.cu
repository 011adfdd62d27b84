// Sampling one token per logit row on the GPU (model/sampling.h's semantics,
// checked against the CPU reference in tests/backend_cuda/cuda_sampling_test).
//
// A row is handled by a cluster of kCluster blocks; each keeps its share of
// the row (vocab / kCluster fp32 logits, ~100 KB for 200064) in shared
// memory, so the logits are read from device memory once and every later
// pass runs on shared memory. Cross-block values (maxima, sums, histograms)
// are exchanged through distributed shared memory; every block reduces the
// same partials in the same order, so all of them take the same decisions
// and the result is deterministic.
//
// Selections (the top-n raw logprobs, top-k, top-p) are the radix selects of
// sampling_cluster.cuh over the 50-bit rank key of sampling_math.h (logit
// descending, lower id first). The draw is Gumbel-max over the kept
// tokens with Philox noise (model/philox.h), an argmax: no sort.
#include <algorithm>
#include <climits>

#include "backend/cuda/common.cuh"
#include "backend/cuda/sampling.h"
#include "backend/cuda/sampling_cluster.cuh"

namespace m2::cuda {
namespace {

using namespace sampling;

constexpr size_t kHistBytes = kBuckets * (sizeof(unsigned long long) + sizeof(uint32_t));
constexpr int64_t kMaxChunk = static_cast<int64_t>((kMaxDynamicSmem - kHistBytes) / sizeof(float));

#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 900

__global__ void __cluster_dims__(kCluster, 1, 1) __launch_bounds__(kThreads, 2)
    sample_kernel(const float* __restrict__ logits, int64_t V, int chunk, const SampleRowArgs* __restrict__ args,
                  const LogitEdit* __restrict__ edits, SampleRowResult* __restrict__ results) {
  extern __shared__ __align__(16) unsigned char smem[];
  u64* h_mass = reinterpret_cast<u64*>(smem);
  uint32_t* h_count = reinterpret_cast<uint32_t*>(h_mass + kBuckets);
  float* vals = reinterpret_cast<float*>(h_count + kBuckets);
  __shared__ int top_count;
  __shared__ int32_t top_ids[kMaxLogprobs];

  cg::cluster_group cluster = cg::this_cluster();
  const unsigned rank = cluster.block_rank();
  const int64_t row = blockIdx.y;
  const SampleRowArgs a = args[row];
  const int lo = static_cast<int>(rank) * chunk;
  const int64_t left = V - lo;
  const int n = left <= 0 ? 0 : left < chunk ? static_cast<int>(left) : chunk;
  const float* raw = logits + row * V;
  for (int i = threadIdx.x; i < n; i += kThreads) vals[i] = raw[lo + i];
  __syncthreads();

  // 1. Raw-distribution logprobs: log-normaliser as the CPU computes it
  //    (float max, fp64 sum of exp(float(v - max))), and the top n.
  float log_z = 0.0f;
  if (a.logprobs >= 0) {
    float m = -INFINITY;
    for (int i = threadIdx.x; i < n; i += kThreads) m = fmaxf(m, vals[i]);
    m = cluster_reduce(cluster, m, FMaxOp{}, -INFINITY);
    double s = 0;
    if (m != -INFINITY)
      for (int i = threadIdx.x; i < n; i += kThreads) s += exp(static_cast<double>(vals[i] - m));
    s = cluster_reduce(cluster, s, SumOp{}, 0.0);
    log_z = m == -INFINITY ? m : m + static_cast<float>(log(s));
    if (a.logprobs > 0) {
      const u64 want = static_cast<u64>(a.logprobs < V ? a.logprobs : V);
      const uint64_t t = cluster_select<false>(cluster, vals, n, lo, 0, want, 0.0f, 0.0f, h_count, h_mass);
      if (threadIdx.x == 0) top_count = 0;
      __syncthreads();
      for (int i = threadIdx.x; i < n; i += kThreads) {
        if (sample_rank_key(vals[i], lo + i) >= t) {
          const int p = atomicAdd(&top_count, 1);
          if (p < kMaxLogprobs) top_ids[p] = lo + i;
        }
      }
      cluster.sync();  // every block's candidates are listed
      if (rank == 0 && threadIdx.x == 0) {
        SampleRowResult& res = results[row];
        int count = 0;
        for (unsigned k = 0; k < kCluster; ++k) {
          const int c = min(*cluster.map_shared_rank(&top_count, k), kMaxLogprobs);
          const int32_t* ids = cluster.map_shared_rank(top_ids, k);
          for (int j = 0; j < c && count < kMaxLogprobs; ++j) {
            // Insertion in rank order.
            const int32_t id = ids[j];
            const uint64_t key = sample_rank_key(raw[id], id);
            int p = count++;
            while (p > 0 && sample_rank_key(raw[res.top_ids[p - 1]], res.top_ids[p - 1]) < key) {
              res.top_ids[p] = res.top_ids[p - 1];
              --p;
            }
            res.top_ids[p] = id;
          }
        }
        res.num_top = count;
        for (int j = 0; j < count; ++j) res.top_logprobs[j] = raw[res.top_ids[j]] - log_z;
      }
      cluster.sync();  // block 0 has read the lists
    }
  }

  // 2. The row's edits (ascending distinct ids) on this block's share.
  for (int e = threadIdx.x; e < a.num_edits; e += kThreads) {
    const LogitEdit ed = edits[a.first_edit + e];
    const int j = ed.id - lo;
    if (j >= 0 && j < n) vals[j] = apply_logit_edit(vals[j], ed, a.repetition_penalty);
  }
  __syncthreads();

  // 3. The token: forced; greedy (the best rank key: lowest id on ties, token
  //    0 when everything is -inf); or top-k, top-p, min-p and the draw.
  int32_t chosen = a.forced;
  if (chosen < 0) {
    uint64_t best = 0;
    float mx = -INFINITY;
    uint32_t valid = 0;
    for (int i = threadIdx.x; i < n; i += kThreads) {
      const uint64_t key = sample_rank_key(vals[i], lo + i);
      best = key > best ? key : best;
      if (key >= kValidKeyFloor) ++valid, mx = fmaxf(mx, vals[i]);
    }
    best = cluster_reduce(cluster, static_cast<u64>(best), MaxOp{}, u64{0});
    chosen = static_cast<int32_t>((kSampleMaxVocab - 1) - static_cast<int64_t>(best & (kSampleMaxVocab - 1)));
    if (a.inv_temperature > 0.0) {
      const uint32_t num_valid = cluster_reduce(cluster, valid, SumOp{}, 0u);
      mx = cluster_reduce(cluster, mx, FMaxOp{}, -INFINITY);
      if (num_valid > 0) {
        const float inv_t = static_cast<float>(a.inv_temperature);
        uint64_t t = kValidKeyFloor;
        if (a.top_k > 0 && static_cast<uint32_t>(a.top_k) < num_valid) {
          const uint64_t tk = cluster_select<false>(cluster, vals, n, lo, t, static_cast<u64>(a.top_k), mx, inv_t,
                                                    h_count, h_mass);
          t = tk > t ? tk : t;
        }
        if (a.top_p < 1.0f) {
          u64 total = 0;
          for (int i = threadIdx.x; i < n; i += kThreads)
            if (sample_rank_key(vals[i], lo + i) >= t) total += mass_fixed(vals[i], mx, inv_t);
          total = cluster_reduce(cluster, total, SumOp{}, u64{0});
          const double target = ceil(static_cast<double>(a.top_p) * static_cast<double>(total));
          const u64 want = target < 1.0 ? 1 : static_cast<u64>(target);
          const uint64_t tp = cluster_select<true>(cluster, vals, n, lo, t, want, mx, inv_t, h_count, h_mass);
          t = tp > t ? tp : t;
        }
        // Gumbel-max over the kept tokens, in fp64 with the CPU's rounding
        // (explicit _rn operations: no contraction into FMA).
        Best b{-INFINITY, INT_MAX};
        for (int i = threadIdx.x; i < n; i += kThreads) {
          const int32_t id = lo + i;
          if (sample_rank_key(vals[i], id) < t) continue;
          const double d = __dmul_rn(__dsub_rn(static_cast<double>(vals[i]), static_cast<double>(mx)), a.inv_temperature);
          if (a.min_p > 0.0f && !(exp(d) >= static_cast<double>(a.min_p))) continue;
          const double key = __dadd_rn(d, sampling_gumbel(a.seed, a.step, static_cast<uint32_t>(id)));
          b = BestOp{}(b, Best{key, id});
        }
        b = cluster_reduce(cluster, b, BestOp{}, Best{-INFINITY, INT_MAX});
        chosen = b.id;
      }
    }
  }

  if (rank == 0 && threadIdx.x == 0) {
    SampleRowResult& res = results[row];
    res.id = chosen;
    res.logprob = a.logprobs >= 0 ? raw[chosen] - log_z : 0.0f;
    if (a.logprobs <= 0) res.num_top = 0;
  }
  cluster.sync();  // no block exits while another may still read its shared memory
}

#else

__global__ void __launch_bounds__(kThreads, 2)
    sample_kernel(const float* __restrict__ logits, int64_t V, int chunk, const SampleRowArgs* __restrict__ args,
                  const LogitEdit* __restrict__ edits, SampleRowResult* __restrict__ results) {
  __trap();
}

#endif

}  // namespace

int64_t sample_max_vocab() { return std::min<int64_t>(kMaxChunk * kCluster, kSampleMaxVocab); }

cudaError_t launch_sample(const float* logits, int64_t rows, int64_t vocab, const SampleRowArgs* args,
                          const LogitEdit* edits, SampleRowResult* results, cudaStream_t stream) {
  if (rows <= 0) return cudaSuccess;
  if (vocab < 1 || vocab > sample_max_vocab() || rows > 65535) return cudaErrorInvalidValue;
  const int chunk = static_cast<int>(ceil_div(vocab, kCluster));
  const size_t smem = kHistBytes + static_cast<size_t>(chunk) * sizeof(float);
  if (const cudaError_t e = allow_dynamic_smem(sample_kernel, smem); e != cudaSuccess) return e;
  sample_kernel<<<dim3(kCluster, static_cast<unsigned>(rows)), kThreads, smem, stream>>>(logits, vocab, chunk, args,
                                                                                        edits, results);
  return cudaGetLastError();
}

}  // namespace m2::cuda
