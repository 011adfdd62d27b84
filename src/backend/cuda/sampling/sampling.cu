// Sampling one token per logit row on the GPU (model/sampling.h's semantics,
// checked against the CPU reference in tests/backend/cuda/sampling/sampling_test).
//
// A row is handled by a cluster of kCluster blocks; each keeps its share of
// the row (vocab / kCluster fp32 logits, ~100 KB for 200064) in shared
// memory, so the logits are read from device memory once and every later
// pass runs on shared memory. Cross-block values (maxima, sums, histograms,
// candidates) go through distributed shared memory (sampling_cluster.cuh).
//
// The draw is Gumbel-max over the kept tokens with Philox noise
// (model/philox.h), an argmax: no sort. What needs an order is the kept set,
// in the 50-bit rank key of sampling_math.h (logit descending, lower id
// first): top-k keeps the k best; top-p the shortest rank-order prefix whose
// mass reaches top_p of the total, masses being fixed-point
// exp((l - max) / T) * 2^40 (integer sums: exact and order-independent).
// After one pass for the row's max, it takes two passes:
//  - histogram: every drawable logit counted (top-p alone: its mass added)
//    in one of kBins bins of its distance below the max. The bins follow the
//    rank order, so the bins up to the one where the count reaches top_k
//    (the mass top_p of the total) hold a rank-order prefix of the row that
//    contains the kept set.
//  - gather: if that prefix has at most kMaxCandidates logits, the blocks
//    append their rank keys to block 0's list; block 0 sorts it, cuts it
//    (top-k, then top-p on its running masses) and draws from it alone. If
//    only the crossing bin is that small (one filter, a long kept prefix),
//    block 0 sorts that bin, finds the threshold key in it from the bins
//    before, and every block draws from its share.
// Otherwise (many ties, or distances beyond the bins' range: all-equal
// logits, logits of ~1e5) the radix select of sampling_cluster.cuh finds
// the thresholds: 9-bit digits, up to six passes a filter. Every way keeps
// exactly the same set of tokens, hence draws the same token.
#include <algorithm>
#include <climits>

#include "backend/cuda/runtime/async_copy.cuh"
#include "backend/cuda/runtime/common.cuh"
#include "backend/cuda/sampling/sampling.h"
#include "backend/cuda/sampling/sampling_cluster.cuh"

namespace m2::cuda {
namespace {

using namespace sampling;

constexpr int kBins = 2 * kThreads;  // the distance histogram (below): two bins per thread in the scan
// Block 0's candidate list (rank keys), two per thread; it overlays h_mass.
constexpr int kMaxCandidates = 2 * kThreads;
// h_mass (u64) then h_count (u32) per bin; the radix select uses their
// first kBuckets entries.
constexpr size_t kHistBytes = kBins * (sizeof(uint64_t) + sizeof(uint32_t));
static_assert(kBins >= kBuckets && kMaxCandidates <= kBins);
// A block's share is a multiple of 4 logits (16-byte copies).
constexpr int64_t kMaxChunk = (kMaxDynamicSmem - kHistBytes) / sizeof(float) / 4 * 4;

#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 900

// The distance histogram's bin of a drawable logit v below the row's max:
// d = max - v (>= 0, so its float bits grow with it) by its exponent and top
// 5 mantissa bits, 32 bins an octave (3 % wide) over [2^-16, 2^16); bin 0
// takes the closer, the last bin the farther logits. Bins never decrease as
// v decreases: a bin's logits all rank below those of the bins before it.
constexpr int kBinShift = 23 - 5;
constexpr uint32_t kBinFirst = (127u - 16u) << 5;  // bits(2^-16) >> kBinShift

__device__ int distance_bin(float v, float max_v) {
  const uint32_t b = __float_as_uint(max_v - v) >> kBinShift;
  return b <= kBinFirst ? 0 : static_cast<int>(min(b - kBinFirst, static_cast<uint32_t>(kBins - 1)));
}

// The logit and id of a drawable logit's rank key (sample_rank_key inverted).
__device__ float key_value(u64 key) {
  const uint32_t o = static_cast<uint32_t>(key >> kSampleIdBits);
  return __uint_as_float(o & 0x80000000u ? o & 0x7fffffffu : ~o);
}
__device__ int32_t key_id(u64 key) {
  return static_cast<int32_t>((kSampleMaxVocab - 1) - static_cast<int64_t>(key & (kSampleMaxVocab - 1)));
}

// This block's share of the row (`n` logits from `src`) into shared memory:
// 16-byte cp.async when the share is 16-byte aligned (vocabularies that are
// a multiple of 4), else 4-byte loads.
__device__ void load_share(float* vals, const float* src, int n) {
  int done = 0;
  if ((reinterpret_cast<uintptr_t>(src) & 15) == 0) {
    done = n / 4 * 4;
    for (int i = 4 * static_cast<int>(threadIdx.x); i < done; i += 4 * kThreads) cp_async16(vals + i, src + i, true);
    cp_async_commit();
    cp_async_wait<0>();
  }
  for (int i = done + static_cast<int>(threadIdx.x); i < n; i += kThreads) vals[i] = src[i];
  __syncthreads();
}

struct RowStats {
  u64 best;        // the best rank key (greedy's token)
  uint32_t valid;  // drawable logits
  float max;       // the largest drawable logit
};

// The row's stats in every block: one pass, one exchange. The slots are
// read after this returns: callers sync the cluster again before leaving.
__device__ RowStats row_stats(cg::cluster_group& cluster, const float* vals, int n, int lo) {
  __shared__ RowStats slot;
  u64 best = 0;
  uint32_t valid = 0;
  float mx = -INFINITY;
  for (int i = threadIdx.x; i < n; i += kThreads) {
    const uint64_t key = sample_rank_key(vals[i], lo + i);
    best = key > best ? key : best;
    if (key >= kValidKeyFloor) ++valid, mx = fmaxf(mx, vals[i]);
  }
  best = block_reduce(best, MaxOp{}, u64{0});
  valid = block_reduce(valid, SumOp{}, 0u);
  mx = block_reduce(mx, FMaxOp{}, -INFINITY);
  if (threadIdx.x == 0) slot = RowStats{best, valid, mx};
  cluster.sync();
  RowStats r{0, 0, -INFINITY};
  for (unsigned k = 0; k < kCluster; ++k) {
    const RowStats s = *cluster.map_shared_rank(&slot, k);
    r.best = s.best > r.best ? s.best : r.best;
    r.valid += s.valid;
    r.max = fmaxf(r.max, s.max);
  }
  return r;
}

// This block's distance histogram of its drawable logits: counts, and with
// `by_mass` fixed-point masses (h_count/h_mass zeroed by the caller).
// Shared-memory 64-bit adds are compare-and-swap loops: the lanes of a warp
// that fall in one bin add their masses first, as 20-bit halves (sums of 32
// fit in 32 bits), and one of them adds the total.
__device__ void bin_histogram(const float* vals, int n, float max_v, float inv_t, bool by_mass, uint32_t* h_count,
                              u64* h_mass) {
  const int lane = threadIdx.x % kWarp;
  for (int base = 0; base < n; base += kThreads) {  // the same trip count in a warp: it matches its lanes
    const int i = base + static_cast<int>(threadIdx.x);
    int b = -1;
    u64 w = 0;
    if (i < n && float_order_key(vals[i]) > kNegInfOrderKey) {
      b = distance_bin(vals[i], max_v);
      if (by_mass) w = mass_fixed(vals[i], max_v, inv_t);
    }
    if (!by_mass) {
      if (b >= 0) atomicAdd(&h_count[b], 1u);
      continue;
    }
    const unsigned peers = __match_any_sync(0xffffffffu, b);
    const unsigned low = __reduce_add_sync(peers, static_cast<unsigned>(w & 0xfffffu));
    const unsigned high = __reduce_add_sync(peers, static_cast<unsigned>(w >> 20));
    if (b >= 0 && __ffs(peers) - 1 == lane) {
      atomicAdd(&h_count[b], static_cast<uint32_t>(__popc(peers)));
      if (low != 0 || high != 0) atomicAdd(&h_mass[b], (static_cast<u64>(high) << 20) + low);
    }
  }
}

struct BinCut {
  int bin;           // the bin where the running count (mass) reaches `want`
  uint32_t before;   // drawable logits in the bins before it
  uint32_t through;  // ... up to it
  u64 mass_before;   // the mass of those before (by mass only)
  u64 want;          // top_k, or the fixed-point mass top_p asks for
};

// The crossing bin of the cluster's histograms, the same in every block:
// the first where the running count reaches `top_k` (by_mass false; top_k <
// the drawable logits) or the running mass reaches nucleus_want(top_p,
// total) (by_mass; total >= 2^40, the max's own mass, so the want is below
// it). Both are reached, so the bin exists.
__device__ BinCut find_cut(cg::cluster_group& cluster, const uint32_t* h_count, const u64* h_mass, bool by_mass,
                           u64 top_k, float top_p) {
  __shared__ BinCut cut;
  __shared__ u64 total;
  const int b0 = 2 * static_cast<int>(threadIdx.x);  // this thread's bins b0, b0 + 1 (rank order = thread order)
  u64 c0 = 0, c1 = 0, m0 = 0, m1 = 0;
  for (unsigned k = 0; k < kCluster; ++k) {
    const uint2 c = *reinterpret_cast<const uint2*>(cluster.map_shared_rank(h_count, k) + b0);
    c0 += c.x, c1 += c.y;
    if (by_mass) {
      const ulonglong2 m = *reinterpret_cast<const ulonglong2*>(cluster.map_shared_rank(h_mass, k) + b0);
      m0 += m.x, m1 += m.y;
    }
  }
  const u64 count_incl = block_inclusive_scan(c0 + c1);
  const u64 count_excl = count_incl - c0 - c1;
  u64 want = top_k, w0 = c0, w1 = c1, excl = count_excl, mass_excl = 0;
  if (by_mass) {
    const u64 mass_incl = block_inclusive_scan(m0 + m1);
    mass_excl = mass_incl - m0 - m1;
    if (threadIdx.x == kThreads - 1) total = mass_incl;
    __syncthreads();
    want = nucleus_want(top_p, total);
    w0 = m0, w1 = m1, excl = mass_excl;
  }
  const auto u32 = [](u64 x) { return static_cast<uint32_t>(x); };
  if (excl < want && want <= excl + w0)
    cut = BinCut{b0, u32(count_excl), u32(count_excl + c0), mass_excl, want};
  else if (excl + w0 < want && want <= excl + w0 + w1)
    cut = BinCut{b0 + 1, u32(count_excl + c0), u32(count_excl + c0 + c1), mass_excl + m0, want};
  __syncthreads();
  return cut;
}

// Appends the rank keys of this block's drawable logits in bins [first,
// last] to block 0's `list` (its length `*size`), a warp at a time.
__device__ void append_candidates(const float* vals, int n, int lo, float max_v, int first, int last, u64* list,
                                  int* size) {
  const int lane = threadIdx.x % kWarp;
  for (int base = 0; base < n; base += kThreads) {
    const int i = base + static_cast<int>(threadIdx.x);
    u64 key = 0;
    bool take = false;
    if (i < n) {
      key = sample_rank_key(vals[i], lo + i);
      const int b = distance_bin(vals[i], max_v);
      take = key >= kValidKeyFloor && b >= first && b <= last;
    }
    const unsigned ballot = __ballot_sync(0xffffffffu, take);
    if (ballot == 0) continue;
    int at = 0;
    if (lane == 0) at = atomicAdd(size, __popc(ballot));
    at = __shfl_sync(0xffffffffu, at, 0) + __popc(ballot & ((1u << lane) - 1));
    if (take) list[at] = key;
  }
}

// Sorts list[0, n) descending: a bitonic network over the next power of
// two, padded with 0 (below every key).
__device__ void sort_desc(u64* list, int n) {
  int p = 1;
  while (p < n) p *= 2;
  for (int i = n + static_cast<int>(threadIdx.x); i < p; i += kThreads) list[i] = 0;
  __syncthreads();
  for (int k = 2; k <= p; k *= 2) {
    for (int j = k / 2; j > 0; j /= 2) {
      for (int q = threadIdx.x; q < p / 2; q += kThreads) {
        const int i = 2 * q - (q & (j - 1)), l = i + j;  // the pair (i, i + j), bit j of i clear
        const u64 x = list[i], y = list[l];
        if (((i & k) == 0) == (x < y)) list[i] = y, list[l] = x;  // descending where bit k of i is clear
      }
      __syncthreads();
    }
  }
}

// Over the sorted list[0, m): the length of the shortest prefix whose
// running fixed-point mass reaches `want` (0: nucleus_want(top_p, the mass
// of list[0, m))); m if none does.
__device__ int mass_prefix(const u64* list, int m, float max_v, float inv_t, u64 want, float top_p) {
  __shared__ u64 total;
  __shared__ int end;
  const int i0 = 2 * static_cast<int>(threadIdx.x);  // this thread's positions i0, i0 + 1
  const u64 w0 = i0 < m ? mass_fixed(key_value(list[i0]), max_v, inv_t) : 0;
  const u64 w1 = i0 + 1 < m ? mass_fixed(key_value(list[i0 + 1]), max_v, inv_t) : 0;
  const u64 incl = block_inclusive_scan(w0 + w1);
  if (threadIdx.x == kThreads - 1) total = incl;
  if (threadIdx.x == 0) end = m;
  __syncthreads();
  if (want == 0) want = nucleus_want(top_p, total);
  const u64 excl = incl - w0 - w1;
  if (excl < want && want <= excl + w0) end = i0 + 1;
  else if (excl + w0 < want && want <= incl) end = i0 + 2;
  __syncthreads();
  return end;
}

// The draw's key of a kept logit, (v - max) / T + Gumbel noise, in fp64 with
// the CPU's rounding (explicit _rn operations: no contraction into FMA);
// false when min-p drops the logit.
__device__ bool gumbel_key(float v, int32_t id, float max_v, const SampleRowArgs& a, double* key) {
  const double d = __dmul_rn(__dsub_rn(static_cast<double>(v), static_cast<double>(max_v)), a.inv_temperature);
  if (a.min_p > 0.0f && !(exp(d) >= static_cast<double>(a.min_p))) return false;
  *key = __dadd_rn(d, sampling_gumbel(a.seed, a.step, static_cast<uint32_t>(id)));
  return true;
}

__global__ void __cluster_dims__(kCluster, 1, 1) __launch_bounds__(kThreads, 2)
    sample_kernel(const float* __restrict__ logits, int64_t V, int chunk, const SampleRowArgs* __restrict__ args,
                  const LogitEdit* __restrict__ edits, const uint32_t* __restrict__ masks,
                  SampleRowResult* __restrict__ results) {
  extern __shared__ __align__(16) unsigned char smem[];
  u64* h_mass = reinterpret_cast<u64*>(smem);  // in block 0 also the candidate list
  uint32_t* h_count = reinterpret_cast<uint32_t*>(h_mass + kBins);
  float* vals = reinterpret_cast<float*>(h_count + kBins);
  __shared__ int top_count;
  __shared__ int32_t top_ids[kMaxLogprobs];
  __shared__ int list_size;
  __shared__ u64 threshold;

  cg::cluster_group cluster = cg::this_cluster();
  const unsigned rank = cluster.block_rank();
  const int64_t row = blockIdx.y;
  const SampleRowArgs a = args[row];
  const int lo = static_cast<int>(rank) * chunk;
  const int64_t left = V - lo;
  const int n = left <= 0 ? 0 : left < chunk ? static_cast<int>(left) : chunk;
  const float* raw = logits + row * V;
  load_share(vals, raw + lo, n);

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
      cluster.sync();  // block 0 has read the lists (and every block the histograms)
    }
  }

  // 2. The row's edits (ascending distinct ids) on this block's share.
  for (int e = threadIdx.x; e < a.num_edits; e += kThreads) {
    const LogitEdit ed = edits[a.first_edit + e];
    const int j = ed.id - lo;
    if (j >= 0 && j < n) vals[j] = apply_logit_edit(vals[j], ed, a.repetition_penalty);
  }
  // ... and its token mask: disallowed tokens leave the draw (not a forced
  // row's: as the CPU, model/sampling.cpp). The raw logprobs above are of
  // the unmasked row, as there.
  if (a.mask >= 0 && a.forced < 0) {
    __syncthreads();  // the edits are done (an edited token may also be masked)
    const uint32_t* m = masks + a.mask;
    for (int j = threadIdx.x; j < n; j += kThreads) {
      const int id = lo + j;
      if (!((m[id >> 5] >> (id & 31)) & 1u)) vals[j] = -INFINITY;
    }
  }

  // 3. The token: forced; greedy (the best rank key: lowest id on ties, token
  //    0 when everything is -inf); or top-k, top-p, min-p and the draw.
  int32_t chosen = a.forced;
  bool alone = false;  // block 0 finishing by itself (the other blocks have left)
  if (chosen < 0) {
    const bool filtered = a.inv_temperature > 0.0 && (a.top_k > 0 || a.top_p < 1.0f);
    if (filtered) {
      for (int i = threadIdx.x; i < kBins; i += kThreads) h_count[i] = 0, h_mass[i] = 0;
      if (threadIdx.x == 0) list_size = 0;
    }
    __syncthreads();  // the edits and the zeroing are done
    const RowStats st = row_stats(cluster, vals, n, lo);
    chosen = key_id(st.best);
    if (a.inv_temperature > 0.0 && st.valid > 0) {
      const float inv_t = static_cast<float>(a.inv_temperature);
      const bool use_k = a.top_k > 0 && static_cast<uint32_t>(a.top_k) < st.valid;
      const bool use_p = a.top_p < 1.0f;
      uint64_t t = kValidKeyFloor;  // kept: key >= t (and min-p)
      bool radix = use_k || use_p;  // thresholds left to the radix select
      if (radix && isfinite(st.max)) {
        const bool by_mass = !use_k;
        bin_histogram(vals, n, st.max, inv_t, by_mass, h_count, h_mass);
        cluster.sync();  // every block's histogram is complete
        const BinCut c = find_cut(cluster, h_count, h_mass, by_mass, static_cast<u64>(a.top_k), a.top_p);
        const bool whole = c.through <= kMaxCandidates;  // the list gets the whole prefix
        const bool bin_only = !whole && !(use_k && use_p) && c.through - c.before <= kMaxCandidates;
        radix = !whole && !bin_only;
        // Every block has read the histograms before block 0's list
        // overwrites its h_mass (read by mass only) or the radix select
        // resets them.
        if (by_mass || radix) cluster.sync();
        if (!radix) {
          append_candidates(vals, n, lo, st.max, whole ? 0 : c.bin, c.bin, cluster.map_shared_rank(h_mass, 0),
                            cluster.map_shared_rank(&list_size, 0));
          cluster.sync();  // block 0's list is complete
          if (whole && rank != 0) return;  // block 0 cuts and draws alone; no block reads another's memory again
          if (rank == 0) {
            u64* list = h_mass;
            const int size = list_size;
            sort_desc(list, size);
            if (whole) {
              // The list is a rank-order prefix of the row holding the kept
              // tokens: cut it and draw from it.
              int m = use_k ? a.top_k : size;
              if (use_p) m = mass_prefix(list, m, st.max, inv_t, use_k ? 0 : c.want, a.top_p);
              Best b{-INFINITY, INT_MAX};
              for (int i = threadIdx.x; i < m; i += kThreads) {
                const int32_t id = key_id(list[i]);
                double key;
                if (gumbel_key(key_value(list[i]), id, st.max, a, &key)) b = BestOp{}(b, Best{key, id});
              }
              chosen = block_reduce(b, BestOp{}, Best{-INFINITY, INT_MAX}).id;
              alone = true;
            } else {
              // The list is the crossing bin: the kept tokens are the bins
              // before it and the list's prefix down to the threshold key.
              const int end = use_k ? a.top_k - static_cast<int>(c.before)
                                    : mass_prefix(list, size, st.max, inv_t, c.want - c.mass_before, 0.0f);
              if (threadIdx.x < kCluster) *cluster.map_shared_rank(&threshold, threadIdx.x) = list[end - 1];
            }
          }
          if (!whole) {
            cluster.sync();  // every block has the threshold
            t = threshold;
          }
        }
      }
      if (radix) {
        if (use_k) {
          const uint64_t tk = cluster_select<false>(cluster, vals, n, lo, t, static_cast<u64>(a.top_k), st.max, inv_t,
                                                    h_count, h_mass);
          t = tk > t ? tk : t;
        }
        if (use_p) {
          u64 total = 0;
          for (int i = threadIdx.x; i < n; i += kThreads)
            if (sample_rank_key(vals[i], lo + i) >= t) total += mass_fixed(vals[i], st.max, inv_t);
          total = cluster_reduce(cluster, total, SumOp{}, u64{0});
          const uint64_t tp = cluster_select<true>(cluster, vals, n, lo, t, nucleus_want(a.top_p, total), st.max,
                                                   inv_t, h_count, h_mass);
          t = tp > t ? tp : t;
        }
      }
      if (!alone) {  // Gumbel-max over this block's kept logits, then the cluster's best
        Best b{-INFINITY, INT_MAX};
        for (int i = threadIdx.x; i < n; i += kThreads) {
          const int32_t id = lo + i;
          double key;
          if (sample_rank_key(vals[i], id) >= t && gumbel_key(vals[i], id, st.max, a, &key))
            b = BestOp{}(b, Best{key, id});
        }
        chosen = cluster_reduce(cluster, b, BestOp{}, Best{-INFINITY, INT_MAX}).id;
      }
    }
  }

  if (rank == 0 && threadIdx.x == 0) {
    SampleRowResult& res = results[row];
    res.id = chosen;
    res.logprob = a.logprobs >= 0 ? raw[chosen] - log_z : 0.0f;
    if (a.logprobs <= 0) res.num_top = 0;
  }
  if (!alone) cluster.sync();  // no block exits while another may still read its shared memory
}

#else

__global__ void __launch_bounds__(kThreads, 2)
    sample_kernel(const float* __restrict__ logits, int64_t V, int chunk, const SampleRowArgs* __restrict__ args,
                  const LogitEdit* __restrict__ edits, const uint32_t* __restrict__ masks,
                  SampleRowResult* __restrict__ results) {
  __trap();
}

#endif

}  // namespace

int64_t sample_max_vocab() { return std::min<int64_t>(kMaxChunk * kCluster, kSampleMaxVocab); }

cudaError_t launch_sample(const float* logits, int64_t rows, int64_t vocab, const SampleRowArgs* args,
                          const LogitEdit* edits, const uint32_t* masks, SampleRowResult* results,
                          cudaStream_t stream) {
  if (rows <= 0) return cudaSuccess;
  if (vocab < 1 || vocab > sample_max_vocab() || rows > 65535) return cudaErrorInvalidValue;
  const int chunk = static_cast<int>(ceil_div(ceil_div(vocab, kCluster), 4) * 4);
  const size_t smem = kHistBytes + static_cast<size_t>(chunk) * sizeof(float);
  if (const cudaError_t e = allow_dynamic_smem(sample_kernel, smem); e != cudaSuccess) return e;
  sample_kernel<<<dim3(kCluster, static_cast<unsigned>(rows)), kThreads, smem, stream>>>(logits, vocab, chunk, args,
                                                                                        edits, masks, results);
  return cudaGetLastError();
}

}  // namespace m2::cuda
