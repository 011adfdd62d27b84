// The decode MoE (at most kMoeDecodePairs (token, expert) pairs; launch_moe
// in moe.cu calls it) as two streams of expert weights (the down stream on
// tensor cores instead where it can: moe_decode_wgmma.cu):
//   up:   u[s, n] = silu(W1_e[n, :] · x_t) · (W3_e[n, :] · x_t) for each pair
//         s = t * top_k + j of expert e = ids[s], n < I;
//   down: out[t, n] = Σ_j w[t, j] · W2_{e_j}[n, :] · u[t * top_k + j], n < H.
// Each kernel is one wave of blocks (the grid sized from the SM count and
// the blocks an SM holds), and each warp walks its rows in stages of 16-byte
// chunks per lane held in a ring of registers (LoadRing): D stages are in
// flight, and stage s + D is issued as soon as stage s has been used, so a
// warp waits for DRAM once, at its start, and its loads stay in flight while
// it computes. Both kernels are launched early (launch_pdl): once the kernel
// before is done they read their routing, issue their first stages, and
// only then stage their activations (x, u) and the FP8 block scales of their
// rows into shared memory with cp.async (every copy in flight at once, no
// registers): one round trip, overlapping the weights'. On an H200 the
// kernels these replaced (2 rows a warp, 3 dependent load groups) took 51.9 µs
// at T=1 and 156 µs at T=4 against 50.7 and 130.
//
// Every sum runs in a fixed order (a lane's chunks in ascending order, one
// fmaf per chunk; W2 chunk by chunk over batches of 8 slots; then the warp
// shuffle tree of warp_sum), whatever the grid.
#include <algorithm>

#include "backend/cuda/gemm/gemv.cuh"
#include "backend/cuda/moe/experts.cuh"
#include "backend/cuda/moe/moe.h"
#include "backend/cuda/moe/moe_decode.h"
#include "backend/cuda/runtime/async_copy.cuh"

namespace m2::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / kWarp;

// W1|W3: stages of 3 chunks a lane of each (half an FP8 row of H = 3072:
// 3072 B / 16 B / 32 lanes = 6 chunks a lane), 3 in flight (288 B a lane,
// 72 registers); 2 blocks an SM (16 warps, at most 128 registers a thread).
constexpr int kUpChunks = 3;
constexpr int kUpDepth = 3;
constexpr int kUpBlocksPerSm = 2;
// W2: stages of one chunk of each of 8 slots, 4 in flight (512 B a lane,
// 128 registers); 1 block an SM: at H = 3072 on 132 SMs every warp gets 3
// rows. (2 blocks an SM with 2 stages in flight each was as fast at T=4 and
// 17 % slower at T=1, measured.)
constexpr int kDownBatch = 8;
constexpr int kDownDepth = 4;
constexpr int kDownBlocksPerSm = 1;

// A warp's weight loads as a sequence of stages of N 16-byte chunks a lane,
// D stages in flight in registers. A source says where its current stage's
// chunks are (src.chunk(k); null reads as zeros, e.g. past the warp's last
// stage) and moves on to the next (src.next()). prime() issues the first D
// stages; run() hands `stages` stages in order to use(chunks), each followed
// by the source's next stage issued into the registers it held (a
// compile-time slot of the unrolled inner loop: registers cannot be indexed
// at run time).
template <int D, int N>
struct LoadRing {
  uint4 v[D][N];

  template <class Src>
  __device__ void issue(int d, Src& src) {
#pragma unroll
    for (int k = 0; k < N; ++k) {
      const uint8_t* p = src.chunk(k);
      v[d][k] = p ? load_weights(p) : make_uint4(0, 0, 0, 0);
    }
    src.next();
  }
  template <class Src>
  __device__ void prime(Src& src) {
#pragma unroll
    for (int d = 0; d < D; ++d) issue(d, src);
  }
  template <class Src, class Use>
  __device__ void run(int stages, Src& src, Use& use) {
    for (int s0 = 0; s0 < stages; s0 += D) {
#pragma unroll
      for (int d = 0; d < D; ++d) {
        if (s0 + d >= stages) break;
        use(v[d]);
        issue(d, src);
      }
    }
  }
};

// A block's rows [first, last) of a matrix of `rows` rows, rows_per_block (a
// multiple of kWarps) per block column y; warp w takes rows first + w +
// kWarps * r, r < count.
struct WarpRows {
  int first, last, count;
  __device__ WarpRows(int64_t rows, int rows_per_block, int warp) {
    first = static_cast<int>(blockIdx.y) * rows_per_block;
    last = static_cast<int>(min(rows, static_cast<int64_t>(first) + rows_per_block));
    count = max(last - first - warp + kWarps - 1, 0) / kWarps;
  }
};

// 16-byte chunks c = i * kWarp + lane of a row of kc chunks that lane reads
// (i < lane_chunks).
__device__ inline int lane_chunks(int64_t kc, int lane) {
  return static_cast<int>(ceil_div(max(kc - lane, int64_t{0}), kWarp));
}

// Rows t < n_rows (row_ptr(t), K floats) into xs in stage_rows' layout
// (gemv.cuh), by cp.async: the caller commits and waits.
template <DType T, class RowPtr>
__device__ void stage_rows_async(float4* xs, const XLayout& lay, int n_rows, int64_t K, const RowPtr& row_ptr) {
  const int per_row = lay.row_stride();
  for (int idx = threadIdx.x; idx < n_rows * per_row; idx += blockDim.x) {
    const float* row = row_ptr(idx / per_row);
    const int64_t col = staged_col<T>(lay, idx % per_row);
    cp_async16(xs + idx, col < K ? row + col : row, col < K);
  }
}

// FP8 block scales of rows [first, last) of nm matrices (scales_of(m): matrix
// m's [rows / 128, ld]) to ss by cp.async: scale row first / 128 + i of
// matrix m at ss[(m * srows + i) * ld], srows = scale_rows_of(first, last).
// The scale of chunk i of a lane then sits i * kScaleStep + lane / 8 further
// along its row.
constexpr int kScaleStep = kWarp * Stored<DType::kF8E4M3>::kPer16 / kScaleBlock;
__device__ inline int scale_rows_of(int first, int last) { return (last - 1) / kScaleBlock - first / kScaleBlock + 1; }
template <class ScalesOf>
__device__ void stage_scales_async(float* ss, int nm, const ScalesOf& scales_of, int ld, int first, int last) {
  const int per = scale_rows_of(first, last) * ld, r0 = first / kScaleBlock;
  for (int idx = threadIdx.x; idx < nm * per; idx += blockDim.x)
    cp_async4(ss + idx, scales_of(idx / per) + r0 * ld + idx % per, true);
}

// Between a warp's first weight loads and its staging copies: keeps ptxas
// from moving the loads below the copies and their wait (load_weights).
__device__ inline void issued() { __syncthreads(); }

// Waits for this thread's cp.async copies, then for the block's.
__device__ inline void staged() {
  cp_async_commit();
  cp_async_wait<0>();
  __syncthreads();
}

// Stage (r, g) of a warp's walk over its rows of W1|W3: the lane's chunks
// i = g * kUpChunks + k (k < kUpChunks) of its row r of W1, then the same of
// W3 (both products of a chunk read its x values once).
struct UpStage {
  int r = 0, g = 0;
  __device__ void next(int groups) {
    if (++g < groups) return;
    g = 0;
    ++r;
  }
};
struct UpSource {
  UpStage at;
  const uint8_t* w1;  // the lane's chunk 0 in row r of W1, of W3
  const uint8_t* w3;
  int64_t row_step;   // bytes from one row of the warp to its next
  int rows, groups, chunks;
  __device__ const uint8_t* chunk(int k) const {
    const bool up = k >= kUpChunks;
    const int i = at.g * kUpChunks + (up ? k - kUpChunks : k);
    return at.r < rows && i < chunks ? (up ? w3 : w1) + i * (kWarp * 16) : nullptr;
  }
  __device__ void next() {
    const int r = at.r;
    at.next(groups);
    if (at.r != r) w1 += row_step, w3 += row_step;
  }
};

// grid (pairs, I / rows_per_block). Dynamic shared memory: the pair's token's
// x row (XLayout), then (FP8) W1's and W3's scales of the block's rows.
template <DType WT>
__global__ void __launch_bounds__(kThreads, kUpBlocksPerSm)
    moe_up_stream_kernel(MoeArgs a, float* u, int rows_per_block) {
  constexpr int V = Stored<WT>::kPer16;
  extern __shared__ float4 xs[];
  const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
  const int64_t s = blockIdx.x, H = a.experts.hidden, I = a.experts.intermediate, KC = H / V;
  const WarpRows rows(I, rows_per_block, warp);
  const XLayout lay = make_layout<WT>(H, kWarp);
  const int groups = static_cast<int>(ceil_div(lay.KI, kUpChunks)), stages = rows.count * groups;
  grid_dependency_wait();  // the expert ids are the router's (x was written before them)
  allow_dependents();  // after the wait: the wgmma down kernel reads the routing before its own
  const int64_t e = a.expert_ids[s];
  const uint8_t* const w1 = a.experts.w1 + e * a.experts.stride13;
  const uint8_t* const w3 = a.experts.w3 + e * a.experts.stride13;
  const int64_t lane0 = ((rows.first + warp) * KC + lane) * 16;  // byte offset of the lane's first chunk
  UpSource src{{}, w1 + lane0, w3 + lane0, kWarps * KC * 16, rows.count, groups, lane_chunks(KC, lane)};
  LoadRing<kUpDepth, 2 * kUpChunks> ring;
  ring.prime(src);
  issued();
  stage_rows_async<WT>(xs, lay, 1, H, [&](int) { return a.x + s / a.top_k * H; });
  const int ld = static_cast<int>(ceil_div(H, kScaleBlock)), sr0 = rows.first / kScaleBlock;
  const int srows = scale_rows_of(rows.first, rows.last);
  float* const ss = reinterpret_cast<float*>(xs + lay.row_stride());
  if constexpr (WT == DType::kF8E4M3) {
    auto scales_of = [&](int m) { return reinterpret_cast<const float*>((m ? w3 : w1) + a.experts.scale_off13); };
    stage_scales_async(ss, 2, scales_of, ld, rows.first, rows.last);
  }
  staged();
  UpStage at;                      // the stage being used
  float acc1 = 0.0f, acc3 = 0.0f;  // its row's W1 (gate) and W3 (up) sums
  auto use = [&](const uint4 (&v)[2 * kUpChunks]) {
    const int n = rows.first + warp + kWarps * at.r;
    const float* const sc1 = ss + (n / kScaleBlock - sr0) * ld + lane / 8;  // W1's scale row; W3's srows further
#pragma unroll
    for (int k = 0; k < kUpChunks; ++k) {
      const int i = at.g * kUpChunks + k;
      if (i >= src.chunks) break;
      float p1 = 0.0f, p3 = 0.0f;
#pragma unroll
      for (int j = 0; j < V / 4; ++j) {
        const float4 xv = xs[(i * (V / 4) + j) * kWarp + lane];
        p1 = dot4(xv, decode4<WT>(v[k], j), p1);
        p3 = dot4(xv, decode4<WT>(v[kUpChunks + k], j), p3);
      }
      float s1 = 1.0f, s3 = 1.0f;
      if constexpr (WT == DType::kF8E4M3) s1 = sc1[i * kScaleStep], s3 = sc1[srows * ld + i * kScaleStep];
      acc1 = fmaf(p1, s1, acc1);
      acc3 = fmaf(p3, s3, acc3);
    }
    if (at.g == groups - 1) {
      const float gate = warp_sum(acc1), up = warp_sum(acc3);
      if (lane == 0) u[static_cast<int64_t>(blockIdx.x) * I + n] = silu_mul(gate, up);
      acc1 = acc3 = 0.0f;
    }
    at.next(groups);
  };
  ring.run(stages, src, use);
}

// Stage (r, b, i) of a warp's walk over its rows of the token's W2s, i
// fastest: the lane's chunk i of its row r of the W2 of each slot
// b * kDownBatch + k, k < kDownBatch.
struct DownStage {
  int r = 0, b = 0, i = 0;
  __device__ void next(int batches, int ki) {
    if (++i < ki) return;
    i = 0;
    if (++b < batches) return;
    b = 0;
    ++r;
  }
};
struct DownSource {
  DownStage at;
  const uint8_t* w2;      // a.experts.w2 + the lane's chunk 0 in row r
  const int64_t* offset;  // of each slot's W2 from a.experts.w2 (shared memory)
  int64_t row_step;       // bytes from one row of the warp to its next
  int rows, batches, ki, chunks, top_k;
  __device__ const uint8_t* chunk(int k) const {
    const int j = at.b * kDownBatch + k;
    return at.r < rows && at.i < chunks && j < top_k ? w2 + offset[j] + at.i * (kWarp * 16) : nullptr;
  }
  __device__ void next() {
    const int r = at.r;
    at.next(batches, ki);
    if (at.r != r) w2 += row_step;
  }
};

// grid (T, H / rows_per_block). Dynamic shared memory: the token's top_k
// u rows (XLayout), then (FP8) each slot's W2 scales of the block's rows.
template <DType WT>
__global__ void __launch_bounds__(kThreads, kDownBlocksPerSm)
    moe_down_stream_kernel(MoeArgs a, const float* u, int rows_per_block) {
  constexpr int V = Stored<WT>::kPer16;
  extern __shared__ float4 us[];
  __shared__ int64_t offset[kMoeMaxTopK];  // slot j's W2 starts at a.experts.w2 + offset[j]
  __shared__ float weight[kMoeMaxTopK];    // slot j's routing weight
  const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
  const int64_t t = blockIdx.x, H = a.experts.hidden, I = a.experts.intermediate, KC = I / V;
  const WarpRows rows(H, rows_per_block, warp);
  const XLayout lay = make_layout<WT>(I, kWarp);
  const int batches = static_cast<int>(ceil_div(a.top_k, kDownBatch)), stages = rows.count * batches * lay.KI;
  grid_dependency_wait();  // u is the up kernel's (the routing the router's, before it)
  allow_dependents();
  if (static_cast<int>(threadIdx.x) < a.top_k) {
    offset[threadIdx.x] = a.expert_ids[t * a.top_k + threadIdx.x] * a.experts.stride2;
    weight[threadIdx.x] = a.weights[t * a.top_k + threadIdx.x];
  }
  __syncthreads();
  DownSource src{{},         a.experts.w2 + ((rows.first + warp) * KC + lane) * 16, offset, kWarps * KC * 16,
                 rows.count, batches, lay.KI, lane_chunks(KC, lane), a.top_k};
  LoadRing<kDownDepth, kDownBatch> ring;
  ring.prime(src);
  issued();
  stage_rows_async<WT>(us, lay, a.top_k, I, [&](int j) { return u + (t * a.top_k + j) * I; });
  const int ld = static_cast<int>(ceil_div(I, kScaleBlock)), sr0 = rows.first / kScaleBlock;
  const int srows = scale_rows_of(rows.first, rows.last);
  float* const ss = reinterpret_cast<float*>(us + static_cast<int64_t>(a.top_k) * lay.row_stride());
  if constexpr (WT == DType::kF8E4M3) {
    auto scales_of = [&](int j) {
      return reinterpret_cast<const float*>(a.experts.w2 + offset[j] + a.experts.scale_off2);
    };
    stage_scales_async(ss, a.top_k, scales_of, ld, rows.first, rows.last);
  }
  staged();
  DownStage at;  // the stage being used
  float sum = 0.0f;
  auto use = [&](const uint4 (&v)[kDownBatch]) {
    const int n = rows.first + warp + kWarps * at.r;
    if (at.i < src.chunks) {
      const float* const sc_row = ss + (n / kScaleBlock - sr0) * ld + at.i * kScaleStep + lane / 8;
      const float4* const xr = us + at.i * (V / 4) * kWarp + lane;
#pragma unroll
      for (int k = 0; k < kDownBatch; ++k) {
        const int j = at.b * kDownBatch + k;
        if (j >= a.top_k) break;
        float part = 0.0f;
#pragma unroll
        for (int q = 0; q < V / 4; ++q) part = dot4(xr[j * lay.row_stride() + q * kWarp], decode4<WT>(v[k], q), part);
        float sc = weight[j];
        if constexpr (WT == DType::kF8E4M3) sc *= sc_row[j * srows * ld];
        sum = fmaf(part, sc, sum);
      }
    }
    if (at.b == batches - 1 && at.i == lay.KI - 1) {
      const float total = warp_sum(sum);
      if (lane == 0) a.out[t * H + n] = total;
      sum = 0.0f;
    }
    at.next(batches, lay.KI);
  };
  ring.run(stages, src, use);
}

// Scale rows that rows_per_block consecutive rows of a matrix of `rows` rows
// can touch.
int64_t max_scale_rows(int64_t rows_per_block, int64_t rows) {
  return std::min(ceil_div(rows, kScaleBlock), ceil_div(rows_per_block - 1, kScaleBlock) + 1);
}

// Rows per block such that `columns` block columns (pairs, tokens) over a
// matrix of `rows` rows take at most `slots` blocks, every warp the same
// whole number of rows.
int64_t wave_rows_per_block(int64_t rows, int64_t columns, int64_t slots) {
  const int64_t per_column = std::max<int64_t>(1, slots / std::max<int64_t>(columns, 1));
  return kWarps * ceil_div(rows, per_column * kWarps);
}

template <DType WT>
cudaError_t launch_typed(const MoeArgs& a, float* u, float* y, cudaStream_t stream) {
  constexpr size_t kScaleFloat = WT == DType::kF8E4M3 ? sizeof(float) : 0;  // no scales for BF16
  const int64_t H = a.experts.hidden, I = a.experts.intermediate, P = a.T * a.top_k;
  cudaError_t e = cudaSuccess;
  int sms = a.num_sms, device = 0;
  if (sms <= 0 && ((e = cudaGetDevice(&device)) != cudaSuccess ||
                   (e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device)) != cudaSuccess))
    return e;
  const int64_t up_rows = wave_rows_per_block(I, P, static_cast<int64_t>(sms) * kUpBlocksPerSm);
  const int64_t down_rows = wave_rows_per_block(H, a.T, static_cast<int64_t>(sms) * kDownBlocksPerSm);
  const size_t up_smem = staged_row_float4<WT>(H, kWarp) * sizeof(float4) +
                         2 * max_scale_rows(up_rows, I) * ceil_div(H, kScaleBlock) * kScaleFloat;
  const size_t down_smem = (staged_row_float4<WT>(I, kWarp) * sizeof(float4) +
                            max_scale_rows(down_rows, H) * ceil_div(I, kScaleBlock) * kScaleFloat) * a.top_k;
  if ((e = allow_dynamic_smem(moe_up_stream_kernel<WT>, up_smem)) != cudaSuccess) return e;
  const dim3 up_grid(static_cast<unsigned>(P), static_cast<unsigned>(ceil_div(I, up_rows)));
  if ((e = launch_pdl(moe_up_stream_kernel<WT>, up_grid, kThreads, up_smem, stream, a, u, static_cast<int>(up_rows))) !=
      cudaSuccess)
    return e;
  if (a.wgmma_decode && moe_decode_wgmma_supported(a)) return launch_moe_down_wgmma(a, u, y, stream);
  if ((e = allow_dynamic_smem(moe_down_stream_kernel<WT>, down_smem)) != cudaSuccess) return e;
  const dim3 down_grid(static_cast<unsigned>(a.T), static_cast<unsigned>(ceil_div(H, down_rows)));
  return launch_pdl(moe_down_stream_kernel<WT>, down_grid, kThreads, down_smem, stream, a, static_cast<const float*>(u),
                    static_cast<int>(down_rows));
}

}  // namespace

cudaError_t launch_moe_decode(const MoeArgs& a, float* u, float* y, cudaStream_t stream) {
  switch (a.experts.dtype) {
    case DType::kF8E4M3: return launch_typed<DType::kF8E4M3>(a, u, y, stream);
    case DType::kBF16: return launch_typed<DType::kBF16>(a, u, y, stream);
    default: return cudaErrorInvalidValue;
  }
}

}  // namespace m2::cuda
