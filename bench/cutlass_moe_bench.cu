// CUTLASS 3 (Hopper, sm_90a) grouped FP8 GEMM with blockwise scaling against
// our own grouped MoE kernel (moe_fp8.cu), at the MoE shapes of MiniMax-M2:
// 256 experts, hidden H = 3072, intermediate I = 1536, top-8 of uniformly
// random routing, T in {256, 2048, 8192} tokens (docs/design.md, "FP8 GEMM";
// the open point "MoE: write our own or build on CUTLASS, decide by measurement").
//
// Built only with -DM2CPP_CUTLASS_BENCH=ON (CUTLASS headers from the PyPI
// package nvidia-cutlass, scripts/setup.sh). Run: build-gpu/cutlass_moe_bench
// [--iters N] [--tokens 256,2048,8192] [--no-own] [--keep-empty: groups of
// M_e = 0 too].
//
// CUTLASS kernels (one grouped GEMM per projection, one group per expert that
// has pairs): D_e[M_e, N] = A_e[M_e, K] · B_e[N, K]ᵀ with
//   A  e4m3 rows of the expert's pairs, contiguous (pair-sorted activations),
//   SFA fp32 one per row per 128 k, "MN-major", one compact block per group:
//       sfa_e[kb * M_e + m]. CUTLASS 4.2's grouped blockwise mainloop
//       (sm90_mma_array_tma_gmma_ss_warpspecialized_fp8_blockwise_scaling.hpp,
//       load_init) ignores the layout_SFA/layout_SFB arguments: per group it
//       rebuilds both with tile_atom_to_shape_SF{A,B}(M_e, N, K), i.e. a
//       k-block stride of M_e. Our quantize layout [K / 128, P] (stride P,
//       fp8_gemm.h: s[kb * T + t]) is therefore gathered into these blocks
//       (gather_sfa; group e's block at offset first[e] * K / 128, so the
//       total is P * K / 128 again); in the model that would be fused into
//       the quantisation. Scales are read one fp32 at a time (cp.async of 4
//       bytes): no alignment beyond 4 bytes;
//   B  e4m3 weights [N, K] row-major (CUTLASS "column-major B");
//   SFB fp32 one per 128 x 128 block, "K-major": sfb[nb * (K / 128) + kb] —
//       our DeviceWeight scale layout unchanged (W1|W3 stacked: W1's 12 scale
//       rows then W3's);
//   D  fp32 row-major [M_e, N] (no C operand).
// The conversions: the up projection's activations must be contiguous per
// expert, so x8 [T, H] and its scales [H / 128, T] are gathered into pair
// order (A [P, H], SFA [H / 128, P]), and SFA then into per-group blocks
// (above); in the model both gathers would be fused into the quantisation
// and are not timed here. The down projection's input (the SwiGLU
// output) is per pair already, in pair-sorted order when the up GEMM's
// output is.
//
// Ours (launch_moe_fp8_experts) does more per call than the two CUTLASS
// GEMMs: the quantisation of x, the gather of token rows, the SwiGLU and its
// re-quantisation in the up kernel's epilogue. Both are timed for the same
// FLOPs: 2 · P · (2I · H + H · I).
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "cute/tensor.hpp"
#include "cutlass/cutlass.h"
#include "cutlass/epilogue/collective/collective_builder.hpp"
#include "cutlass/epilogue/dispatch_policy.hpp"
#include "cutlass/gemm/collective/collective_builder.hpp"
#include "cutlass/gemm/device/gemm_universal_adapter.h"
#include "cutlass/gemm/dispatch_policy.hpp"
#include "cutlass/gemm/group_array_problem_shape.hpp"
#include "cutlass/gemm/kernel/gemm_universal.hpp"
#include "cutlass/util/packed_stride.hpp"
#include "cutlass/version.h"

#include "backend/cuda/gemm/fp8_gemm.h"
#include "backend/cuda/moe/moe.h"
#include "backend/cuda/runtime/roofline.h"
#include "gemm_mismatch.h"

#if !defined(CUTLASS_ARCH_MMA_SM90_SUPPORTED) || !defined(CUTLASS_ARCH_MMA_MODIFIABLE_TMA_SM90_SUPPORTED)
#error "cutlass_moe_bench needs sm_90a (CMAKE_CUDA_ARCHITECTURES=90a-real) and CUDA >= 12.3"
#endif

using namespace cute;

// A named namespace: nvcc's host stubs of __global__ functions in an
// anonymous one are ambiguous beside `using namespace cute`.
namespace cutlass_moe_bench {

#define CHECK_CUDA(expr)                                                                           \
  do {                                                                                             \
    cudaError_t e_ = (expr);                                                                       \
    if (e_ != cudaSuccess) {                                                                       \
      std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #expr, cudaGetErrorString(e_)); \
      std::exit(2);                                                                                \
    }                                                                                              \
  } while (0)
#define CHECK_CUTLASS(expr)                                                                               \
  do {                                                                                                    \
    cutlass::Status s_ = (expr);                                                                          \
    if (s_ != cutlass::Status::kSuccess) {                                                                \
      std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #expr, cutlassGetStatusString(s_)); \
      std::exit(2);                                                                                       \
    }                                                                                                     \
  } while (0)

constexpr int kE = 256, kH = 3072, kI = 1536, kTopK = 8, kBlk = 128;

// ---- the CUTLASS grouped GEMM ------------------------------------------------------

using ProblemShape = cutlass::gemm::GroupProblemShape<Shape<int, int, int>>;  // (M, N, K) per group
using ElementA = cutlass::float_e4m3_t;
using ElementB = cutlass::float_e4m3_t;
using ElementD = float;
using ElementAcc = float;
using LayoutA = cutlass::layout::RowMajor;     // activations [M, K]
using LayoutB = cutlass::layout::ColumnMajor;  // weights [N, K] row-major = B [K, N] column-major
using LayoutD = cutlass::layout::RowMajor;     // out [M, N]
constexpr int kAlignAB = 16, kAlignD = 4;      // elements of 16 bytes
// One scale per row (M) per 128 k; one per 128 x 128 block of B. SFA
// MN-major (k-block-major, rows contiguous), SFB K-major (k contiguous).
using ScaleConfig = cutlass::detail::Sm90BlockwiseScaleConfig<1, kBlk, kBlk, cute::GMMA::Major::MN, cute::GMMA::Major::K>;
using LayoutSFA = decltype(ScaleConfig::deduce_layoutSFA());
using LayoutSFB = decltype(ScaleConfig::deduce_layoutSFB());

template <class TileShape, class ClusterShape, class KernelSchedule, class EpilogueSchedule>
struct GroupedFp8 {
  using CollectiveEpilogue = typename cutlass::epilogue::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, TileShape, ClusterShape,
      cutlass::epilogue::collective::EpilogueTileAuto, ElementAcc, ElementAcc, void, LayoutD*, kAlignD, ElementD,
      LayoutD*, kAlignD, EpilogueSchedule,
      cutlass::epilogue::fusion::LinearCombination<ElementD, ElementAcc, void, ElementAcc>>::CollectiveOp;
  using CollectiveMainloop = typename cutlass::gemm::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, ElementA, cute::tuple<LayoutA*, LayoutSFA*>, kAlignAB,
      ElementB, cute::tuple<LayoutB*, LayoutSFB*>, kAlignAB, ElementAcc, TileShape, ClusterShape,
      cutlass::gemm::collective::StageCountAutoCarveout<static_cast<int>(
          sizeof(typename CollectiveEpilogue::SharedStorage))>,
      KernelSchedule>::CollectiveOp;
  using Kernel = cutlass::gemm::kernel::GemmUniversal<ProblemShape, CollectiveMainloop, CollectiveEpilogue>;
  using Gemm = cutlass::gemm::device::GemmUniversalAdapter<Kernel>;
};

// Cooperative: 2 consumer warpgroups on one 128 x 128 tile (example 68's
// configuration); Pingpong: 2 consumer warpgroups alternating on 64 x 128
// tiles (less padding for the few rows per expert of small T).
using Coop128 = GroupedFp8<Shape<_128, _128, _128>, Shape<_1, _2, _1>,
                           cutlass::gemm::KernelPtrArrayTmaWarpSpecializedCooperativeFP8Blockwise,
                           cutlass::epilogue::PtrArrayTmaWarpSpecializedCooperative>;
#ifndef M2CPP_CUTLASS_ONE_CONFIG
using Pingpong64 = GroupedFp8<Shape<_64, _128, _128>, Shape<_1, _1, _1>,
                              cutlass::gemm::KernelPtrArrayTmaWarpSpecializedPingpongFP8Blockwise,
                              cutlass::epilogue::PtrArrayTmaWarpSpecializedPingpong>;
// Clusters of two CTAs along M share each weight tile (TMA multicast).
using Pingpong64M2 = GroupedFp8<Shape<_64, _128, _128>, Shape<_2, _1, _1>,
                                cutlass::gemm::KernelPtrArrayTmaWarpSpecializedPingpongFP8Blockwise,
                                cutlass::epilogue::PtrArrayTmaWarpSpecializedPingpong>;
// Clusters of two CTAs along N share each activation tile.
using Pingpong64N2 = GroupedFp8<Shape<_64, _128, _128>, Shape<_1, _2, _1>,
                                cutlass::gemm::KernelPtrArrayTmaWarpSpecializedPingpongFP8Blockwise,
                                cutlass::epilogue::PtrArrayTmaWarpSpecializedPingpong>;
using Coop128C1 = GroupedFp8<Shape<_128, _128, _128>, Shape<_1, _1, _1>,
                             cutlass::gemm::KernelPtrArrayTmaWarpSpecializedCooperativeFP8Blockwise,
                             cutlass::epilogue::PtrArrayTmaWarpSpecializedCooperative>;
using Coop128M2 = GroupedFp8<Shape<_128, _128, _128>, Shape<_2, _1, _1>,
                             cutlass::gemm::KernelPtrArrayTmaWarpSpecializedCooperativeFP8Blockwise,
                             cutlass::epilogue::PtrArrayTmaWarpSpecializedCooperative>;
#endif

// ---- inputs ----------------------------------------------------------------------------

__device__ inline uint32_t mix(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ull;
  x ^= x >> 33;
  return static_cast<uint32_t>(x);
}
__device__ inline float uniform(uint64_t seed, uint64_t i) {  // [-1, 1)
  return static_cast<float>(mix(seed * 0x9e3779b97f4a7c15ull + i) >> 8) * (2.0f / 16777216.0f) - 1.0f;
}
// e4m3 codes of uniform values in [-448, 448) (every code finite).
__global__ void fill_e4m3(uint8_t* p, size_t n, uint64_t seed) {
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < n; i += size_t{gridDim.x} * blockDim.x)
    p[i] = __nv_cvt_float_to_fp8(448.0f * uniform(seed, i), __NV_SATFINITE, __NV_E4M3);
}
// Scales in [lo, 2 lo).
__global__ void fill_scale(float* p, size_t n, uint64_t seed, float lo) {
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < n; i += size_t{gridDim.x} * blockDim.x)
    p[i] = lo * (1.5f + 0.5f * uniform(seed, i));
}
__global__ void fill_f32(float* p, size_t n, uint64_t seed) {
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < n; i += size_t{gridDim.x} * blockDim.x)
    p[i] = uniform(seed, i);
}

// SFA of the groups: src [K / 128, P] (pair p's scale of k block kb at
// src[kb * P + p]) -> dst, expert e's pairs [first[e], first[e] + count[e])
// as one block [K / 128, count[e]] at dst + first[e] * K / 128. One CUDA
// block per expert.
__global__ void gather_sfa(const float* src, int64_t P, int kbs, const int* first, const int* count, float* dst) {
  const int64_t f = first[blockIdx.x], m_e = count[blockIdx.x];
  for (int64_t i = threadIdx.x; i < m_e * kbs; i += blockDim.x) {
    const int64_t kb = i / m_e, m = i % m_e;
    dst[f * kbs + i] = src[kb * P + f + m];
  }
}

// ---- reference -------------------------------------------------------------------------

// out[m, n] = Σ_kb sa[kb * lda_s + m] · sb[(n / 128) * (K / 128) + kb] · Σ_{k in kb} a[m, k] b[n, k]
// for one group (a: M rows of K; b: N rows of K); one thread per output.
__global__ void reference_gemm(const uint8_t* a, const float* sa, int64_t lda_s, const uint8_t* b, const float* sb,
                               int M, int N, int K, float* out) {
  const int n = blockIdx.x * blockDim.x + threadIdx.x, m = blockIdx.y;
  if (n >= N || m >= M) return;
  const int kbs = K / kBlk;
  double sum = 0;
  for (int kb = 0; kb < kbs; ++kb) {
    float block = 0;  // products of e4m3 are exact in fp32; 128 of them sum to well within fp32
    for (int k = kb * kBlk; k < (kb + 1) * kBlk; ++k) {
      const float x = __half2float(__nv_cvt_fp8_to_halfraw(a[int64_t{m} * K + k], __NV_E4M3));
      const float w = __half2float(__nv_cvt_fp8_to_halfraw(b[int64_t{n} * K + k], __NV_E4M3));
      block = fmaf(x, w, block);
    }
    sum += static_cast<double>(block) * sa[kb * lda_s + m] * sb[(n / kBlk) * kbs + kb];
  }
  out[int64_t{m} * N + n] = static_cast<float>(sum);
}

// ---- helpers ---------------------------------------------------------------------------

template <class T>
T* dev_alloc(size_t count) {
  void* p = nullptr;
  CHECK_CUDA(cudaMalloc(&p, std::max<size_t>(count, 1) * sizeof(T)));
  return static_cast<T*>(p);
}
template <class T>
T* dev_copy(const std::vector<T>& v) {
  T* p = dev_alloc<T>(v.size());
  CHECK_CUDA(cudaMemcpy(p, v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice));
  return p;
}
void launch_fill_e4m3(uint8_t* p, size_t n, uint64_t seed) { fill_e4m3<<<2048, 256>>>(p, n, seed); }

// Times `fn` (one call = one measured unit) with CUDA events: warm-up, then
// the mean over `iters` calls queued back to back.
template <class Fn>
double time_us(int iters, Fn fn) {
  for (int i = 0; i < 3; ++i) fn();
  CHECK_CUDA(cudaDeviceSynchronize());
  cudaEvent_t start, stop;
  CHECK_CUDA(cudaEventCreate(&start));
  CHECK_CUDA(cudaEventCreate(&stop));
  // Queue the launches behind a busy kernel so that host launch overhead
  // stays out of the measured GPU time.
  CHECK_CUDA(m2::cuda::launch_gpu_delay(nullptr, 2e-3));
  CHECK_CUDA(cudaEventRecord(start));
  for (int i = 0; i < iters; ++i) fn();
  CHECK_CUDA(cudaEventRecord(stop));
  CHECK_CUDA(cudaEventSynchronize(stop));
  CHECK_CUDA(cudaGetLastError());
  float ms = 0;
  CHECK_CUDA(cudaEventElapsedTime(&ms, start, stop));
  CHECK_CUDA(cudaEventDestroy(start));
  CHECK_CUDA(cudaEventDestroy(stop));
  return 1e3 * ms / iters;
}

// The weights of one layer's experts, once in CUTLASS's layout (W1|W3
// stacked per expert, scales apart) and once in ours (DeviceExperts: w1, w3,
// w2 in separate allocations, each expert's scales after its codes). The
// same bytes in both.
struct Weights {
  uint8_t* w13 = nullptr;  // [E][2I][H]
  float* s13 = nullptr;    // [E][2I / 128][H / 128]
  uint8_t* w2 = nullptr;   // [E][H][I]
  float* s2 = nullptr;     // [E][H / 128][I / 128]
  m2::cuda::DeviceExperts ours;
};

Weights make_weights(bool with_ours) {
  Weights w;
  const size_t n13 = size_t{2} * kI * kH, n2 = size_t{kH} * kI;
  const size_t sc13 = size_t{2} * (kI / kBlk) * (kH / kBlk), sc2 = size_t{kH / kBlk} * (kI / kBlk);
  w.w13 = dev_alloc<uint8_t>(kE * n13);
  w.w2 = dev_alloc<uint8_t>(kE * n2);
  w.s13 = dev_alloc<float>(kE * sc13);
  w.s2 = dev_alloc<float>(kE * sc2);
  launch_fill_e4m3(w.w13, kE * n13, 11);
  launch_fill_e4m3(w.w2, kE * n2, 12);
  // Scales of a real checkpoint's size (weights ~ 1e-2 / 448 per code).
  fill_scale<<<256, 256>>>(w.s13, kE * sc13, 13, 2e-5f);
  fill_scale<<<256, 256>>>(w.s2, kE * sc2, 14, 2e-5f);
  CHECK_CUDA(cudaGetLastError());
  if (!with_ours) return w;

  auto align256 = [](int64_t v) { return (v + 255) / 256 * 256; };
  m2::cuda::DeviceExperts& d = w.ours;
  d.dtype = m2::DType::kF8E4M3;
  d.num_experts = kE;
  d.hidden = kH;
  d.intermediate = kI;
  const int64_t half = int64_t{kI} * kH, scales13 = int64_t{kI / kBlk} * (kH / kBlk) * 4;
  d.scale_off13 = align256(half);
  d.stride13 = align256(d.scale_off13 + scales13);
  d.scale_off2 = align256(int64_t{kH} * kI);
  d.stride2 = align256(d.scale_off2 + int64_t{sc2} * 4);
  uint8_t* w1 = dev_alloc<uint8_t>(kE * d.stride13);
  uint8_t* w3 = dev_alloc<uint8_t>(kE * d.stride13);
  uint8_t* w2 = dev_alloc<uint8_t>(kE * d.stride2);
  // Codes: one row of the copy = one expert's matrix.
  CHECK_CUDA(cudaMemcpy2D(w1, d.stride13, w.w13, n13, half, kE, cudaMemcpyDeviceToDevice));
  CHECK_CUDA(cudaMemcpy2D(w3, d.stride13, w.w13 + half, n13, half, kE, cudaMemcpyDeviceToDevice));
  CHECK_CUDA(cudaMemcpy2D(w2, d.stride2, w.w2, n2, n2, kE, cudaMemcpyDeviceToDevice));
  CHECK_CUDA(cudaMemcpy2D(w1 + d.scale_off13, d.stride13, w.s13, sc13 * 4, scales13, kE, cudaMemcpyDeviceToDevice));
  CHECK_CUDA(cudaMemcpy2D(w3 + d.scale_off13, d.stride13, reinterpret_cast<uint8_t*>(w.s13) + scales13, sc13 * 4,
                          scales13, kE, cudaMemcpyDeviceToDevice));
  CHECK_CUDA(cudaMemcpy2D(w2 + d.scale_off2, d.stride2, w.s2, sc2 * 4, sc2 * 4, kE, cudaMemcpyDeviceToDevice));
  d.w1 = w1;
  d.w3 = w3;
  d.w2 = w2;
  if (!m2::cuda::moe_fp8_supported(d)) {
    std::fprintf(stderr, "FAIL: our experts' layout is not one moe_fp8 takes\n");
    std::exit(1);
  }
  return w;
}

// One token count's routing: top-8 distinct experts per token, uniformly
// random; pairs p = t * 8 + j grouped by expert in token order.
struct Routing {
  int64_t T = 0, P = 0;
  std::vector<int32_t> ids;     // [T * 8]
  std::vector<int32_t> sorted;  // pair indices grouped by expert
  std::vector<int> count, first;  // per expert
};

Routing make_routing(int64_t T, std::mt19937& rng) {
  Routing r;
  r.T = T;
  r.P = T * kTopK;
  r.ids.resize(r.P);
  std::vector<int32_t> perm(kE);
  std::iota(perm.begin(), perm.end(), 0);
  for (int64_t t = 0; t < T; ++t) {
    for (int j = 0; j < kTopK; ++j) std::swap(perm[j], perm[j + rng() % (kE - j)]);  // partial Fisher-Yates
    for (int j = 0; j < kTopK; ++j) r.ids[t * kTopK + j] = perm[j];
  }
  r.count.assign(kE, 0);
  for (int32_t e : r.ids) ++r.count[e];
  r.first.assign(kE, 0);
  for (int e = 1; e < kE; ++e) r.first[e] = r.first[e - 1] + r.count[e - 1];
  r.sorted.resize(r.P);
  std::vector<int> fill = r.first;
  for (int64_t p = 0; p < r.P; ++p) r.sorted[fill[r.ids[p]]++] = static_cast<int32_t>(p);
  return r;
}

// One grouped GEMM's arguments on the device: the groups are the experts
// with pairs (all experts with keep_empty: groups of M_e = 0 have no tiles,
// CUTLASS's group scheduler skips them); A rows of group e start at row
// first[e] of a [P, K] matrix, its scales (sfa: gather_sfa's blocks) at
// first[e] * K / 128, its output at row first[e] of D [P, N].
struct GroupArgs {
  int groups = 0;
  std::vector<int> experts;  // expert of each group
  std::vector<ProblemShape::UnderlyingProblemShape> shapes_host;
  ProblemShape::UnderlyingProblemShape* shapes = nullptr;
  const ElementA** ptr_a = nullptr;
  const ElementB** ptr_b = nullptr;
  const float** ptr_sfa = nullptr;
  const float** ptr_sfb = nullptr;
  ElementD** ptr_d = nullptr;
  LayoutSFA* layout_sfa = nullptr;
  LayoutSFB* layout_sfb = nullptr;
};

GroupArgs make_group_args(const Routing& r, int N, int K, const uint8_t* a, const float* sfa, const uint8_t* w,
                          const float* sw, float* d, bool keep_empty) {
  GroupArgs g;
  std::vector<const ElementA*> pa;
  std::vector<const ElementB*> pb;
  std::vector<const float*> psa, psb;
  std::vector<ElementD*> pd;
  std::vector<LayoutSFA> lsa;
  std::vector<LayoutSFB> lsb;
  const int kbs = K / kBlk;
  for (int e = 0; e < kE; ++e) {
    const int M = r.count[e];
    if (M == 0 && !keep_empty) continue;
    const int64_t row0 = r.first[e];
    g.experts.push_back(e);
    g.shapes_host.push_back({M, N, K});
    pa.push_back(reinterpret_cast<const ElementA*>(a + row0 * K));
    // B_e: the expert's [N, K] row-major weights; its scales [N / 128, K / 128]
    // row-major = the K-major SFB layout tile_atom_to_shape_SFB deduces.
    pb.push_back(reinterpret_cast<const ElementB*>(w + static_cast<int64_t>(e) * N * K));
    psa.push_back(sfa + row0 * kbs);
    psb.push_back(sw + static_cast<int64_t>(e) * (N / kBlk) * kbs);
    pd.push_back(d + row0 * N);
    // The layouts the kernel deduces itself (it does not read these; passed
    // for the arguments' sake and so that they state what the data is).
    lsa.push_back(ScaleConfig::tile_atom_to_shape_SFA(make_shape(M, N, K, 1)));
    lsb.push_back(ScaleConfig::tile_atom_to_shape_SFB(make_shape(M, N, K, 1)));
  }
  g.groups = static_cast<int>(g.experts.size());
  g.shapes = dev_copy(g.shapes_host);
  g.ptr_a = dev_copy(pa);
  g.ptr_b = dev_copy(pb);
  g.ptr_sfa = dev_copy(psa);
  g.ptr_sfb = dev_copy(psb);
  g.ptr_d = dev_copy(pd);
  g.layout_sfa = dev_copy(lsa);
  g.layout_sfb = dev_copy(lsb);
  return g;
}

template <class Cfg>
struct Runner {
  using Gemm = typename Cfg::Gemm;
  using StrideA = typename Gemm::GemmKernel::InternalStrideA;
  using StrideB = typename Gemm::GemmKernel::InternalStrideB;
  using StrideC = typename Gemm::GemmKernel::InternalStrideC;
  using StrideD = typename Gemm::GemmKernel::InternalStrideD;
  Gemm gemm;
  void* workspace = nullptr;

  void init(GroupArgs& g) {
    std::vector<StrideA> sa;
    std::vector<StrideB> sb;
    std::vector<StrideD> sd;
    for (const auto& s : g.shapes_host) {
      const int M = get<0>(s), N = get<1>(s), K = get<2>(s);
      sa.push_back(cutlass::make_cute_packed_stride(StrideA{}, {M, K, 1}));
      sb.push_back(cutlass::make_cute_packed_stride(StrideB{}, {N, K, 1}));
      sd.push_back(cutlass::make_cute_packed_stride(StrideD{}, {M, N, 1}));
    }
    static_assert(std::is_same_v<StrideC, StrideD>, "C and D share strides");
    StrideA* da = dev_copy(sa);
    StrideB* db = dev_copy(sb);
    StrideD* dd = dev_copy(sd);
    cutlass::KernelHardwareInfo hw;
    hw.device_id = 0;
    hw.sm_count = cutlass::KernelHardwareInfo::query_device_multiprocessor_count(0);
    typename Gemm::Arguments args{cutlass::gemm::GemmUniversalMode::kGrouped,
                                  {g.groups, g.shapes, g.shapes_host.data()},
                                  {g.ptr_a, da, g.ptr_b, db, g.ptr_sfa, g.layout_sfa, g.ptr_sfb, g.layout_sfb},
                                  {{}, nullptr, dd, g.ptr_d, dd},
                                  hw};
    args.epilogue.thread.alpha = 1.0f;
    args.epilogue.thread.beta = 0.0f;
    CHECK_CUTLASS(gemm.can_implement(args));
    CHECK_CUDA(cudaMalloc(&workspace, std::max<size_t>(Gemm::get_workspace_size(args), 1)));
    CHECK_CUTLASS(gemm.initialize(args, workspace));
  }
  void run() { CHECK_CUTLASS(gemm.run()); }
};

// Normwise error of groups (several experts, the largest and the
// smallest among them) of d against the reference, which reads the scales in
// our [K / 128, P] layout sa (so it checks gather_sfa too); false above 1e-3,
// with a description of the first failing group.
bool check(const char* what, const Routing& r, const GroupArgs& g, int N, int K, const uint8_t* a, const float* sa,
           const uint8_t* w, const float* sw, const float* d) {
  int big = -1, small = -1;  // among the groups with rows
  for (int i = 0; i < g.groups; ++i) {
    const int M = get<0>(g.shapes_host[i]);
    if (M == 0) continue;
    if (big < 0 || M > get<0>(g.shapes_host[big])) big = i;
    if (small < 0 || M < get<0>(g.shapes_host[small])) small = i;
  }
  std::vector<int> picks;  // group indices
  for (int i : {0, big, small, g.groups / 2, g.groups - 1})
    if (i >= 0 && get<0>(g.shapes_host[i]) > 0) picks.push_back(i);
  double worst = 0;
  bool described = false;
  for (int i : picks) {
    const int e = g.experts[i], M = get<0>(g.shapes_host[i]);
    const int64_t row0 = r.first[e];
    float* ref = dev_alloc<float>(int64_t{M} * N);
    reference_gemm<<<dim3((N + 127) / 128, M), 128>>>(a + row0 * K, sa + row0, r.P, w + int64_t{e} * N * K,
                                                     sw + int64_t{e} * (N / kBlk) * (K / kBlk), M, N, K, ref);
    CHECK_CUDA(cudaGetLastError());
    std::vector<float> hr(int64_t{M} * N), hd(int64_t{M} * N);
    CHECK_CUDA(cudaMemcpy(hr.data(), ref, hr.size() * 4, cudaMemcpyDeviceToHost));
    CHECK_CUDA(cudaMemcpy(hd.data(), d + row0 * N, hd.size() * 4, cudaMemcpyDeviceToHost));
    CHECK_CUDA(cudaFree(ref));
    // Normwise: max |d - ref| over the group's largest |ref|. Hopper's FP8
    // tensor cores add the products of a k block with less than fp32
    // precision (the first run measured ~1e-4 of the largest output, the
    // same for every element), so an elementwise relative error is
    // meaningless on outputs near zero; a wrong layout is off by O(1).
    double amax = 0;
    for (float v : hr) amax = std::max(amax, std::fabs(static_cast<double>(v)));
    double err = 0;
    for (size_t j = 0; j < hr.size(); ++j) {
      if (!(std::fabs(hd[j] - hr[j]) <= err * amax)) err = std::fabs(hd[j] - hr[j]) / amax;
      if (std::isnan(hd[j])) err = INFINITY;
    }
    if (amax == 0) err = INFINITY;  // all-zero output: the kernel did nothing
    worst = std::max(worst, err);
    if (!(err <= 1e-3) && !described) {
      std::printf("  expert %d (group %d of %d, rows %lld..%lld of D): max err %.2e of max |ref|\n", e, i, g.groups,
                  static_cast<long long>(row0), static_cast<long long>(row0 + M - 1), err);
      m2bench::describe_mismatch(hd, hr, M, N, amax, 1e-3);
      described = true;
    }
  }
  const bool ok = worst <= 1e-3;
  std::printf("  check %-28s T=%-5lld %d experts checked: max err %.2e of max |ref| %s\n", what, static_cast<long long>(r.T),
              static_cast<int>(picks.size()), worst, ok ? "ok" : "FAIL");
  return ok;
}

struct Row {
  std::string name;
  int64_t T;
  double us, flops;
};

}  // namespace cutlass_moe_bench

using namespace cutlass_moe_bench;

int main(int argc, char** argv) {
  int iters = 20;
  bool own = true, keep_empty = false;
  int failures = 0;
  std::vector<int64_t> tokens = {256, 2048, 8192};
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--iters") && i + 1 < argc) {
      iters = std::atoi(argv[++i]);
    } else if (!std::strcmp(argv[i], "--no-own")) {
      own = false;
    } else if (!std::strcmp(argv[i], "--keep-empty")) {
      keep_empty = true;
    } else if (!std::strcmp(argv[i], "--tokens") && i + 1 < argc) {
      tokens.clear();
      for (char* s = std::strtok(argv[++i], ","); s; s = std::strtok(nullptr, ",")) tokens.push_back(std::atoll(s));
    } else {
      std::fprintf(stderr, "usage: %s [--iters N] [--tokens 256,2048,8192] [--no-own] [--keep-empty]\n", argv[0]);
      return 2;
    }
  }
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    std::printf("no CUDA device: nothing to measure\n");
    return 0;
  }
  cudaDeviceProp prop{};
  CHECK_CUDA(cudaGetDeviceProperties(&prop, 0));
  std::printf("device: %s (sm_%d%d, %d SMs); CUTLASS %d.%d.%d\n", prop.name, prop.major, prop.minor,
              prop.multiProcessorCount, CUTLASS_MAJOR, CUTLASS_MINOR, CUTLASS_PATCH);
  if (prop.major != 9) {
    std::printf("not a Hopper GPU: the sm_90a kernels cannot run here\n");
    return 0;
  }
  double peak = 0;
  CHECK_CUDA(m2::cuda::measure_gemm_flops(m2::DType::kF8E4M3, &peak));
  std::printf("cuBLASLt dense FP8 GEMM (8192^3) measured now: %.0f TFLOP/s\n", peak / 1e12);

  const Weights w = make_weights(own);
  std::mt19937 rng(7);
  std::vector<Row> rows;
  for (int64_t T : tokens) {
    const Routing r = make_routing(T, rng);
    const int64_t P = r.P;
    int touched = 0;
    for (int c : r.count) touched += c > 0;
    std::printf("T=%lld: %lld pairs over %d experts (rows per expert: mean %.1f, max %d)\n",
                static_cast<long long>(T), static_cast<long long>(P), touched, double(P) / touched,
                *std::max_element(r.count.begin(), r.count.end()));
    // Pair-sorted activations: up A [P, H] + SFA [H / 128, P]; down A [P, I] + SFA [I / 128, P].
    uint8_t* a_up = dev_alloc<uint8_t>(P * kH);
    uint8_t* a_dn = dev_alloc<uint8_t>(P * kI);
    float* s_up = dev_alloc<float>(P * (kH / kBlk));
    float* s_dn = dev_alloc<float>(P * (kI / kBlk));
    float* d_up = dev_alloc<float>(P * 2 * kI);
    float* d_dn = dev_alloc<float>(P * kH);
    launch_fill_e4m3(a_up, P * kH, 21);
    launch_fill_e4m3(a_dn, P * kI, 22);
    fill_scale<<<256, 256>>>(s_up, P * (kH / kBlk), 23, 1e-3f);
    fill_scale<<<256, 256>>>(s_dn, P * (kI / kBlk), 24, 1e-3f);
    // SFA in CUTLASS's per-group blocks (gather_sfa), the same sizes.
    float* g_up = dev_alloc<float>(P * (kH / kBlk));
    float* g_dn = dev_alloc<float>(P * (kI / kBlk));
    int* first = dev_copy(r.first);
    int* count = dev_copy(r.count);
    gather_sfa<<<kE, 256>>>(s_up, P, kH / kBlk, first, count, g_up);
    gather_sfa<<<kE, 256>>>(s_dn, P, kI / kBlk, first, count, g_dn);
    CHECK_CUDA(cudaGetLastError());
    GroupArgs up = make_group_args(r, 2 * kI, kH, a_up, g_up, w.w13, w.s13, d_up, keep_empty);
    GroupArgs dn = make_group_args(r, kH, kI, a_dn, g_dn, w.w2, w.s2, d_dn, keep_empty);
    const double f_up = 2.0 * P * 2 * kI * kH, f_dn = 2.0 * P * kH * kI;

    auto bench_cfg = [&](const char* name, auto cfg) {
      using Cfg = decltype(cfg);
      Runner<Cfg> ru, rd;
      ru.init(up);
      rd.init(dn);
      // From zeros, so that a kernel that writes nothing cannot pass on the
      // previous configuration's output.
      CHECK_CUDA(cudaMemset(d_up, 0, P * 2 * kI * 4));
      CHECK_CUDA(cudaMemset(d_dn, 0, P * kH * 4));
      ru.run();
      rd.run();
      CHECK_CUDA(cudaDeviceSynchronize());
      // Both projections checked; a failed configuration is not timed.
      const bool ok_up =
          check((std::string(name) + " up (W1|W3)").c_str(), r, up, 2 * kI, kH, a_up, s_up, w.w13, w.s13, d_up);
      const bool ok_dn = check((std::string(name) + " down (W2)").c_str(), r, dn, kH, kI, a_dn, s_dn, w.w2, w.s2, d_dn);
      if (!ok_up || !ok_dn) {
        ++failures;
        CHECK_CUDA(cudaFree(ru.workspace));
        CHECK_CUDA(cudaFree(rd.workspace));
        return;
      }
      const double us_up = time_us(iters, [&] { ru.run(); });
      const double us_dn = time_us(iters, [&] { rd.run(); });
      const double us_both = time_us(iters, [&] {
        ru.run();
        rd.run();
      });
      rows.push_back({std::string("cutlass ") + name + " up", T, us_up, f_up});
      rows.push_back({std::string("cutlass ") + name + " down", T, us_dn, f_dn});
      rows.push_back({std::string("cutlass ") + name + " up+down", T, us_both, f_up + f_dn});
      CHECK_CUDA(cudaFree(ru.workspace));
      CHECK_CUDA(cudaFree(rd.workspace));
    };
    bench_cfg("coop 128x128 c1x2", Coop128{});
#ifndef M2CPP_CUTLASS_ONE_CONFIG
    bench_cfg("pingpong 64x128", Pingpong64{});
    bench_cfg("pingpong 64x128 c2x1", Pingpong64M2{});
    bench_cfg("pingpong 64x128 c1x2", Pingpong64N2{});
    bench_cfg("coop 128x128 c1x1", Coop128C1{});
    bench_cfg("coop 128x128 c2x1", Coop128M2{});
#endif

    if (own) {
      // Ours: quantise x, up (gather, SwiGLU, re-quantise), down; grouped as
      // moe.cu's moe_group_kernel does (tiles of at most 64 pairs of one expert).
      std::vector<int4> tiles;
      for (int e = 0; e < kE; ++e)
        for (int f = 0; f < r.count[e]; f += m2::cuda::kFp8MoeTilePairs)
          tiles.push_back(make_int4(e, r.first[e] + f, std::min(m2::cuda::kFp8MoeTilePairs, r.count[e] - f), 0));
      const int num_tiles = static_cast<int>(tiles.size());
      float* x = dev_alloc<float>(T * kH);
      fill_f32<<<1024, 256>>>(x, T * kH, 31);
      float* y = dev_alloc<float>(P * kH);
      m2::cuda::MoeArgs a;
      a.x = x;
      a.T = T;
      a.experts = w.ours;
      a.expert_ids = dev_copy(r.ids);
      a.top_k = kTopK;
      m2::cuda::MoeFp8Groups gr{dev_copy(r.sorted), dev_copy(tiles), dev_copy(std::vector<int>{num_tiles}), num_tiles};
      void* scratch = dev_alloc<uint8_t>(m2::cuda::moe_fp8_scratch_bytes(T, kTopK, kH, kI));
      const double us = time_us(iters, [&] { CHECK_CUDA(m2::cuda::launch_moe_fp8_experts(a, gr, scratch, y, nullptr)); });
      rows.push_back({"ours quantize+up+swiglu+down", T, us, f_up + f_dn});
      CHECK_CUDA(cudaFree(x));
      CHECK_CUDA(cudaFree(y));
      CHECK_CUDA(cudaFree(scratch));
    }
    for (void* p : {static_cast<void*>(a_up), static_cast<void*>(a_dn), static_cast<void*>(s_up),
                    static_cast<void*>(s_dn), static_cast<void*>(d_up), static_cast<void*>(d_dn),
                    static_cast<void*>(g_up), static_cast<void*>(g_dn), static_cast<void*>(first),
                    static_cast<void*>(count)})
      CHECK_CUDA(cudaFree(p));
  }

  std::printf("\n%-40s %6s %10s %9s %8s\n", "kernel", "T", "us", "TFLOP/s", "% fp8");
  for (const Row& r : rows)
    std::printf("%-40s %6lld %10.1f %9.1f %7.1f%%\n", r.name.c_str(), static_cast<long long>(r.T), r.us,
                r.flops / r.us / 1e6, peak > 0 ? 100.0 * r.flops / (r.us * 1e-6) / peak : 0.0);
  if (failures > 0) {
    std::fprintf(stderr, "FAIL: %d CUTLASS configuration(s) differ from the reference (limit 1e-3 of the largest output)\n",
                 failures);
    return 1;
  }
  return 0;
}
