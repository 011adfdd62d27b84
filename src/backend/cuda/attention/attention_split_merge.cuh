// The key-split merge shared by the decode attention kernels
// (attention_decode.cu, attention_decode_mma.cu): with several splits, each
// block of a (sequence, kv head) writes one record of its keys' softmax state
// and the last block to finish merges them all (no second kernel).
#pragma once

#include <cfloat>

#include "backend/cuda/runtime/common.cuh"
#include "backend/cuda/attention/attention.h"

namespace m2::cuda {

constexpr int kSplitSlots = kDecodeMaxGroup;  // query slots of a record
// A split's record: max [kSplitSlots] (natural-log units of the scaled
// scores; -inf or -FLT_MAX for a split without keys), sum [kSplitSlots],
// unnormalised output [kSplitSlots][head_dim 128].
constexpr int kSplitRecord = 2 * kSplitSlots + kSplitSlots * kDecodeHeadDim;

// The keys [begin, end) of split `split` of `splits` of a sequence of
// n_keys keys: its own keys divided among the splits in whole tiles (later
// splits may have none), so that one launch serves any mix of contexts (a
// recorded decode step replays whatever its sequences' lengths).
struct KeyRange {
  int begin, end;
};
__device__ inline KeyRange split_key_range(int n_keys, int split, int splits, int tile) {
  if (splits == 1) return {0, n_keys};
  const int per = ((n_keys + splits - 1) / splits + tile - 1) / tile * tile;
  const int begin = split * per;
  return {begin, min(n_keys, begin + per)};
}

// Writes this block's record for vector v (thread d of the vector's 128 dims).
__device__ inline void store_split_record(float* rec, int v, int d, float max, float sum, float acc) {
  if (d == 0) rec[v] = max, rec[kSplitSlots + v] = sum;
  rec[2 * kSplitSlots + v * kDecodeHeadDim + d] = acc;
}

// Called by every thread of the block after it stored its record: false for
// all but the last block of the pair to finish; that one writes out[v * 128 +
// d] for v < G (out: the pair's first query vector) and rearms the counter.
// kThreads a multiple of 128 (threads (part, d) take vectors part,
// part + parts, ...); wts: shared memory for splits x kSplitSlots floats.
template <int KG, int kThreads>
__device__ bool merge_split_records(const AttentionArgs& a, int64_t pair, int G, float* out, float* wts) {
  constexpr int kHd = kDecodeHeadDim, kParts = kThreads / kHd, kWarps = kThreads / kWarp;
  constexpr int kPer = (KG + kParts - 1) / kParts;
  static_assert(kThreads % kHd == 0, "whole output rows per thread group");
  if (!last_to_arrive(&a.counters[pair], static_cast<unsigned>(a.splits))) return false;
  const float* recs = a.partials + pair * a.splits * kSplitRecord;
  const int tid = threadIdx.x, warp = tid / kWarp, lane = tid % kWarp;
  // Each split's weight per vector, e^{M_s - M} / L (0 for splits without
  // keys): warp w takes vectors w, w + kWarps, ..., lane s split s (then
  // s + 32, ...), one round trip for the (max, sum) pairs.
  for (int v = warp; v < G; v += kWarps) {
    float M = -FLT_MAX;
    for (int s = lane; s < a.splits; s += kWarp) M = fmaxf(M, __ldcg(recs + s * kSplitRecord + v));
    M = warp_max(M);
    float Ls = 0.0f;
    for (int s = lane; s < a.splits; s += kWarp) {
      const float c = expf(__ldcg(recs + s * kSplitRecord + v) - M);
      wts[s * kSplitSlots + v] = c;
      Ls = fmaf(__ldcg(recs + s * kSplitRecord + kSplitSlots + v), c, Ls);
    }
    Ls = warp_sum(Ls);
    const float inv = 1.0f / Ls;
    for (int s = lane; s < a.splits; s += kWarp) wts[s * kSplitSlots + v] *= inv;
  }
  __syncthreads();
  // Thread (part, d): the vectors v = part + i * kParts of dim d; the records
  // read kBatch splits at a time, every load of a batch issued before any is
  // used (one L2 round trip per batch, not per split).
  constexpr int kBatch = 8;
  const int d = tid % kHd, part = tid / kHd;
  float A[kPer] = {};
  for (int s0 = 0; s0 < a.splits; s0 += kBatch) {
    float r[kBatch][kPer];
#pragma unroll
    for (int b = 0; b < kBatch; ++b)
#pragma unroll
      for (int i = 0; i < kPer; ++i) {
        const int v = part + i * kParts;
        r[b][i] = s0 + b < a.splits && v < G ? __ldcg(recs + (s0 + b) * kSplitRecord + 2 * kSplitSlots + v * kHd + d)
                                             : 0.0f;
      }
#pragma unroll
    for (int b = 0; b < kBatch; ++b) {
      if (s0 + b >= a.splits) break;
#pragma unroll
      for (int i = 0; i < kPer; ++i) {
        const int v = part + i * kParts;
        if (v < G) A[i] = fmaf(r[b][i], wts[(s0 + b) * kSplitSlots + v], A[i]);
      }
    }
  }
#pragma unroll
  for (int i = 0; i < kPer; ++i) {
    const int v = part + i * kParts;
    if (v < G) out[v * kHd + d] = A[i];
  }
  if (tid == 0) a.counters[pair] = 0;  // ready for the next launch (and graph replay)
  return true;
}

}  // namespace m2::cuda
