// The grouped FP8 MoE experts on CUTLASS 4.2's sm90 grouped GEMM with
// blockwise scaling (moe_cutlass.h), in two of the configurations of
// bench/cutlass_moe_bench.cu: pingpong on 64 x 128 x 128 tiles, and for the
// up GEMM of large prefills cooperative on 128 x 128 x 128 tiles in clusters
// of 1 x 2.
// Compiled for sm_90a only (CMake M2CPP_CUTLASS); the backend uses it on
// sm_90 devices only (device_caps.h).
//
// Per call, all on the stream, E = all experts as groups:
//   1. args:    the GEMMs' per-group shapes, pointers and strides, from
//               first[] (M_e = first[e + 1] - first[e]), which moe.cu's
//               grouping wrote with row_of_pair;
//   2. x -> x8 + sx (launch_quantize_fp8; skipped when x's producer wrote
//      them: MoeArgs::x8), gathered to A1 [P, H] + SFA1;
//   3. D1 = A1 · W1_eᵀ, D3 = A1 · W3_eᵀ  ([P, I] fp32, one grouped GEMM of
//      2E groups: W1 of expert e is group 2e, W3 group 2e + 1, so the two
//      read expert e's rows of A1 one after the other, while in L2);
//   4. A2 [P, I] + SFA2 = quantise(silu(D1) ⊙ D3) per row per 128;
//   5. D2 = A2 · W2_eᵀ                   ([P, H] fp32);
//   6. out[t] = Σ_j w[t, j] · D2[row_of_pair[t * top_k + j]], j in slot order.
// Operand layouts (CUTLASS names): A e4m3 [M_e, K] row-major; B = the
// expert's weights [N, K] row-major ("column-major B"); SFB its 128 x 128
// scales [N / 128, K / 128] row-major (K-major), as stored; SFA one compact
// [K / 128, M_e] block per group (moe_cutlass.h); D fp32 [M_e, N] row-major.
#include <cuda_runtime.h>

#include <algorithm>

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

#include "backend/cuda/gemm/fp8_gemm.h"
#include "backend/cuda/gemm/fp8_mma.cuh"
#include "backend/cuda/moe/experts.cuh"
#include "backend/cuda/moe/moe.h"
#include "backend/cuda/moe/moe_cutlass.h"
#include "backend/cuda/moe/moe_group.h"
#include "backend/cuda/runtime/device_buffer.h"

#if !defined(CUTLASS_ARCH_MMA_SM90_SUPPORTED) || !defined(CUTLASS_ARCH_MMA_MODIFIABLE_TMA_SM90_SUPPORTED)
#error "moe_cutlass.cu needs sm_90a (CMake compiles it for 90a-real only) and CUDA >= 12.3"
#endif

namespace m2::cuda {
namespace {

// ---- the CUTLASS kernels: one per tile schedule --------------------------------

using ProblemShape = cutlass::gemm::GroupProblemShape<cute::Shape<int, int, int>>;  // (M, N, K) per group
using Shape3 = ProblemShape::UnderlyingProblemShape;
using ElementA = cutlass::float_e4m3_t;
using ElementB = cutlass::float_e4m3_t;
using LayoutA = cutlass::layout::RowMajor;
using LayoutB = cutlass::layout::ColumnMajor;
using LayoutD = cutlass::layout::RowMajor;
constexpr int kAlignAB = 16, kAlignD = 4;  // elements of 16 bytes
using ScaleConfig =
    cutlass::detail::Sm90BlockwiseScaleConfig<1, kKBlock, kKBlock, cute::GMMA::Major::MN, cute::GMMA::Major::K>;
using LayoutSFA = decltype(ScaleConfig::deduce_layoutSFA());
using LayoutSFB = decltype(ScaleConfig::deduce_layoutSFB());

template <class TileShape, class ClusterShape, class KernelSchedule, class EpilogueSchedule>
struct GroupedGemm {
  using Epilogue = typename cutlass::epilogue::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, TileShape, ClusterShape,
      cutlass::epilogue::collective::EpilogueTileAuto, float, float, void, LayoutD*, kAlignD, float, LayoutD*,
      kAlignD, EpilogueSchedule, cutlass::epilogue::fusion::LinearCombination<float, float, void, float>>::CollectiveOp;
  using Mainloop = typename cutlass::gemm::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, ElementA, cute::tuple<LayoutA*, LayoutSFA*>, kAlignAB,
      ElementB, cute::tuple<LayoutB*, LayoutSFB*>, kAlignAB, float, TileShape, ClusterShape,
      cutlass::gemm::collective::StageCountAutoCarveout<static_cast<int>(sizeof(typename Epilogue::SharedStorage))>,
      KernelSchedule>::CollectiveOp;
  using Kernel = cutlass::gemm::kernel::GemmUniversal<ProblemShape, Mainloop, Epilogue>;
  using Device = cutlass::gemm::device::GemmUniversalAdapter<Kernel>;
};
// Pingpong on 64 x 128 tiles: two consumer warpgroups alternating, one's
// epilogue under the other's products; little padding for the few rows an
// expert gets at decode sizes. Every GEMM but the large up GEMM.
using Pingpong = GroupedGemm<cute::Shape<cute::_64, cute::_128, cute::_128>, cute::Shape<cute::_1, cute::_1, cute::_1>,
                             cutlass::gemm::KernelPtrArrayTmaWarpSpecializedPingpongFP8Blockwise,
                             cutlass::epilogue::PtrArrayTmaWarpSpecializedPingpong>;
// Cooperative on 128 x 128 tiles, clusters of two CTAs along N sharing each
// A tile: the up GEMM from kMoeCutlassCooperativeMinPairs pairs (bench/cutlass_moe_bench.cu
// on an H200, W1|W3 at 8,192 tokens: 1,578 us against 1,744 pingpong; at
// 2,048 tokens 741 against 699; the down GEMM is faster on pingpong at both).
using Cooperative =
    GroupedGemm<cute::Shape<cute::_128, cute::_128, cute::_128>, cute::Shape<cute::_1, cute::_2, cute::_1>,
                cutlass::gemm::KernelPtrArrayTmaWarpSpecializedCooperativeFP8Blockwise,
                cutlass::epilogue::PtrArrayTmaWarpSpecializedCooperative>;
using StrideA = Pingpong::Kernel::InternalStrideA;
using StrideB = Pingpong::Kernel::InternalStrideB;
using StrideD = Pingpong::Kernel::InternalStrideD;
static_assert(std::is_same_v<Pingpong::Kernel::InternalStrideC, StrideD>, "C and D share strides");
static_assert(std::is_same_v<Cooperative::Kernel::InternalStrideA, StrideA> &&
                  std::is_same_v<Cooperative::Kernel::InternalStrideB, StrideB> &&
                  std::is_same_v<Cooperative::Kernel::InternalStrideD, StrideD>,
              "both kernels take the same group arguments");

// The workspace (per-SM TMA descriptors) is sized for this many SMs once,
// for either kernel; the GEMMs of one call run one after another and share it.
constexpr int kMaxSms = 1024;

// One grouped GEMM's per-group arguments, one entry per group.
struct GroupArgs {
  Shape3* shapes;
  const ElementA** a;
  const float** sfa;
  StrideA* stride_a;
  const ElementB** b;
  const float** sfb;
  StrideB* stride_b;
  float** d;
  StrideD* stride_d;
};
// The two GEMMs: up ([2E] groups, W1 and W3 of each expert) and down ([E]).
struct AllArgs {
  GroupArgs up, down;
};

// Regions of the CUTLASS scratch (moe_cutlass.h) plus the argument arrays and
// the workspace; *total gets the size.
struct Layout {
  MoeCutlassScratch s;
  AllArgs args;
  void* workspace;
  size_t workspace_bytes;
};

template <class G>
size_t workspace_bytes() {
  typename G::Device::Arguments args;
  args.mode = cutlass::gemm::GemmUniversalMode::kGrouped;
  args.hw_info.sm_count = kMaxSms;
  return G::Device::get_workspace_size(args);
}

Layout carve(void* region, int64_t T, int top_k, int64_t H, int64_t I, int64_t E, size_t* total) {
  const int64_t P = T * top_k;
  ScratchLayout lay(region);
  Layout l;
  l.s.first = reinterpret_cast<int32_t*>(lay.take(sizeof(int32_t) * (E + 1)));
  l.s.row_of_pair = reinterpret_cast<int32_t*>(lay.take(sizeof(int32_t) * P));
  l.s.a1 = lay.take(static_cast<size_t>(P * H));
  l.s.sfa1 = reinterpret_cast<float*>(lay.take(sizeof(float) * P * (H / kKBlock)));
  l.s.d3 = reinterpret_cast<float*>(lay.take(sizeof(float) * P * I));
  auto arrays = [&](GroupArgs& g, int64_t groups) {
    g.shapes = reinterpret_cast<Shape3*>(lay.take(sizeof(Shape3) * groups));
    g.a = reinterpret_cast<const ElementA**>(lay.take(sizeof(void*) * groups));
    g.sfa = reinterpret_cast<const float**>(lay.take(sizeof(void*) * groups));
    g.stride_a = reinterpret_cast<StrideA*>(lay.take(sizeof(StrideA) * groups));
    g.stride_b = reinterpret_cast<StrideB*>(lay.take(sizeof(StrideB) * groups));
    g.stride_d = reinterpret_cast<StrideD*>(lay.take(sizeof(StrideD) * groups));
    g.b = reinterpret_cast<const ElementB**>(lay.take(sizeof(void*) * groups));
    g.sfb = reinterpret_cast<const float**>(lay.take(sizeof(void*) * groups));
    g.d = reinterpret_cast<float**>(lay.take(sizeof(void*) * groups));
  };
  arrays(l.args.up, 2 * E);
  arrays(l.args.down, E);
  l.workspace_bytes = std::max(workspace_bytes<Pingpong>(), workspace_bytes<Cooperative>());
  l.workspace = lay.take(l.workspace_bytes);
  *total = lay.size();
  return l;
}

// ---- our kernels ------------------------------------------------------------------

// The expert whose rows hold sorted row r: the last e with first[e] <= r
// (experts without pairs have first[e] == first[e + 1] and are passed over).
__device__ inline int expert_of_row(const int32_t* first, int E, int64_t r) {
  int lo = 0, hi = E - 1;
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (first[mid] <= r) lo = mid;
    else hi = mid - 1;
  }
  return lo;
}

struct ArgsIn {
  DeviceExperts x;
  uint8_t* a1;
  float* sfa1;
  uint8_t* a2;
  float* sfa2;
  float *d1, *d3, *d2;
};

// Group e of a GEMM D [m, N] = A [m, K] · Wᵀ: shape, A and its compact SFA
// block, packed strides, the weight operand (B, SFB: the expert's codes and
// 128 x 128 scales as stored) and the output.
__device__ inline void set_group(GroupArgs& g, int e, int m, int N, int K, const uint8_t* a, const float* sfa,
                                 const DeviceWeight& w, float* d) {
  g.shapes[e] = cute::make_shape(m, N, K);
  g.a[e] = reinterpret_cast<const ElementA*>(a);
  g.sfa[e] = sfa;
  g.stride_a[e] = cutlass::make_cute_packed_stride(StrideA{}, cute::make_shape(m, K, 1));
  g.stride_b[e] = cutlass::make_cute_packed_stride(StrideB{}, cute::make_shape(N, K, 1));
  g.stride_d[e] = cutlass::make_cute_packed_stride(StrideD{}, cute::make_shape(m, N, 1));
  g.b[e] = reinterpret_cast<const ElementB*>(w.data);
  g.sfb[e] = w.scales;
  g.d[e] = d;
}

// Every group's arguments (empty experts too: M_e = 0, their pointers
// unused) from the grouping's first[] (moe_group.h).
__global__ void cutlass_moe_args_kernel(ArgsIn in, MoeCutlassScratch s, AllArgs g) {
  const DeviceExperts& x = in.x;
  const int E = static_cast<int>(x.num_experts);
  const int H = static_cast<int>(x.hidden), I = static_cast<int>(x.intermediate);
  for (int e = threadIdx.x; e < E; e += blockDim.x) {
    const int64_t f = s.first[e];
    const int m = static_cast<int>(s.first[e + 1] - f);
    const uint8_t* a1 = in.a1 + f * H;
    const float* sfa1 = in.sfa1 + f * (H / kKBlock);
    set_group(g.up, 2 * e, m, I, H, a1, sfa1, expert_w13(x, x.w1, e), in.d1 + f * I);
    set_group(g.up, 2 * e + 1, m, I, H, a1, sfa1, expert_w13(x, x.w3, e), in.d3 + f * I);
    set_group(g.down, e, m, H, I, in.a2 + f * I, in.sfa2 + f * (I / kKBlock), expert_w2(x, e), in.d2 + f * H);
  }
}

// A1 [P, H]: row r = x8 row of pair sorted[r]'s token; SFA1 in per-expert
// blocks. One thread per 16 bytes; the first of each 128-byte block also
// moves its scale.
__global__ void cutlass_moe_gather_kernel(const uint8_t* __restrict__ x8, const float* __restrict__ sx, int64_t T,
                                          int top_k, int64_t H, int E, const int32_t* __restrict__ sorted,
                                          const int32_t* __restrict__ first, uint8_t* __restrict__ a1,
                                          float* __restrict__ sfa1, int64_t P) {
  const int64_t chunks = H / 16, i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (i >= P * chunks) return;
  const int64_t r = i / chunks, c = i % chunks, t = sorted[r] / top_k;
  reinterpret_cast<uint4*>(a1 + r * H)[c] = reinterpret_cast<const uint4*>(x8 + t * H)[c];
  if (c % (kKBlock / 16) != 0) return;
  const int e = expert_of_row(first, E, r);
  const int64_t f = first[e], m_e = first[e + 1] - f, kb = c / (kKBlock / 16);
  sfa1[f * (H / kKBlock) + kb * m_e + (r - f)] = sx[kb * T + t];
}

// A2 + SFA2 = quantise(silu(D1) ⊙ D3): a warp per kSwigluGroups 128-column
// groups of a row, all their loads issued first (one group a warp read 2.2
// TB/s of D1 and D3 at an 8K prefill on an H200: 0.36 ms a layer), each group
// quantised by the amax / 448 rule of moe_fp8.cu's up epilogue
// (quantize_group128): the same bytes as one group a warp.
constexpr int kSwigluGroups = 4;
__global__ void cutlass_moe_swiglu_kernel(const float* __restrict__ d1, const float* __restrict__ d3, int64_t I,
                                          int E, const int32_t* __restrict__ first, uint8_t* __restrict__ a2,
                                          float* __restrict__ sfa2, int64_t P) {
  const int64_t kbs = I / kKBlock, chunks = ceil_div(kbs, kSwigluGroups);
  const int64_t w = (blockIdx.x * int64_t{blockDim.x} + threadIdx.x) / kWarp;
  const int lane = threadIdx.x % kWarp;
  if (w >= P * chunks) return;
  const int64_t r = w / chunks, kb0 = (w % chunks) * kSwigluGroups;
  float4 g[kSwigluGroups], u[kSwigluGroups];
#pragma unroll
  for (int i = 0; i < kSwigluGroups; ++i) {
    if (kb0 + i >= kbs) break;
    const int64_t at = r * I + (kb0 + i) * kKBlock + 4 * lane;
    g[i] = *reinterpret_cast<const float4*>(d1 + at);
    u[i] = *reinterpret_cast<const float4*>(d3 + at);
  }
  int64_t f = 0, m_e = 0;  // the row's expert block of SFA2 (lane 0 stores the scales)
  if (lane == 0) {
    const int e = expert_of_row(first, E, r);
    f = first[e], m_e = first[e + 1] - f;
  }
#pragma unroll
  for (int i = 0; i < kSwigluGroups; ++i) {
    const int64_t kb = kb0 + i;
    if (kb >= kbs) break;
    float scale = 0.0f;
    const uint32_t codes = quantize_group128(make_float4(silu_mul(g[i].x, u[i].x), silu_mul(g[i].y, u[i].y),
                                                         silu_mul(g[i].z, u[i].z), silu_mul(g[i].w, u[i].w)),
                                             &scale);
    *reinterpret_cast<uint32_t*>(a2 + r * I + kb * kKBlock + 4 * lane) = codes;
    if (lane == 0) sfa2[f * kbs + kb * m_e + (r - f)] = scale;
  }
}

// out[t, :] = Σ_j w[t, j] · D2[row_of_pair[t * top_k + j], :], j in slot
// order (moe.cu's combine, with D2 in sorted order). A block per token, a
// thread 4 columns at a time with the top_k rows' loads issued together (one
// column a thread with the loads in the sum's chain read 3.2 TB/s at an 8K
// prefill on an H200: 0.25 ms a layer). top_k <= kMoeMaxTopK, H % 4 == 0.
__global__ void cutlass_moe_combine_kernel(MoeArgs a, const float* __restrict__ d2,
                                           const int32_t* __restrict__ row_of_pair) {
  __shared__ const float4* rows[kMoeMaxTopK];
  __shared__ float weight[kMoeMaxTopK];
  const int64_t t = blockIdx.x, H4 = a.experts.hidden / 4;
  const int k = a.top_k;
  if (threadIdx.x < k) {
    rows[threadIdx.x] = reinterpret_cast<const float4*>(d2) + int64_t{row_of_pair[t * k + threadIdx.x]} * H4;
    weight[threadIdx.x] = a.weights[t * k + threadIdx.x];
  }
  __syncthreads();
  for (int64_t h = threadIdx.x; h < H4; h += blockDim.x) {
    float4 v[kMoeMaxTopK];
#pragma unroll
    for (int j = 0; j < kMoeMaxTopK; ++j)
      if (j < k) v[j] = rows[j][h];
    float4 s = make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll
    for (int j = 0; j < kMoeMaxTopK; ++j) {
      if (j >= k) break;
      s.x = fmaf(weight[j], v[j].x, s.x), s.y = fmaf(weight[j], v[j].y, s.y);
      s.z = fmaf(weight[j], v[j].z, s.z), s.w = fmaf(weight[j], v[j].w, s.w);
    }
    reinterpret_cast<float4*>(a.out + t * a.experts.hidden)[h] = s;
  }
}

// ---- the GEMM launches ----------------------------------------------------------

cudaError_t status_error(cutlass::Status s) {
  if (s == cutlass::Status::kSuccess) return cudaSuccess;
  const cudaError_t e = cudaGetLastError();
  return e != cudaSuccess ? e : cudaErrorLaunchFailure;
}

// One grouped GEMM over all E groups, problem shapes on the device only
// (host shapes null: CUTLASS launches one persistent CTA per SM and skips
// groups without tiles).
template <class G>
cudaError_t run_gemm(const GroupArgs& g, int E, int sms, const Layout& l, cudaStream_t stream) {
  using Gemm = typename G::Device;
  using GemmKernel = typename G::Kernel;
  typename Gemm::Arguments args;
  args.mode = cutlass::gemm::GemmUniversalMode::kGrouped;
  args.problem_shape = {E, g.shapes, nullptr};
  // The SFA / SFB layout arrays are not read (the mainloop deduces both per
  // group from (M_e, N, K)): null.
  args.mainloop = {g.a, g.stride_a, g.b, g.stride_b, g.sfa, nullptr, g.sfb, nullptr};
  args.epilogue = {{}, nullptr, g.stride_d, g.d, g.stride_d};
  args.epilogue.thread.alpha = 1.0f;
  args.epilogue.thread.beta = 0.0f;
  cudaGetDevice(&args.hw_info.device_id);
  args.hw_info.sm_count = sms;
  if (Gemm::get_workspace_size(args) > l.workspace_bytes) return cudaErrorInvalidValue;
  cudaError_t e = status_error(Gemm::can_implement(args));
  if (e != cudaSuccess) return e;
  // Params from the arguments (host work only: the TMA descriptors); the
  // shared memory opt-in once per thread (Gemm::initialize would repeat it
  // each call).
  typename GemmKernel::Params params = GemmKernel::to_underlying_arguments(args, l.workspace);
  thread_local bool smem_granted = false;
  if (!smem_granted) {
    e = cudaFuncSetAttribute(cutlass::device_kernel<GemmKernel>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                             GemmKernel::SharedStorageSize);
    if (e != cudaSuccess) return e;
    smem_granted = true;
  }
  return status_error(Gemm::run(params, stream));
}

}  // namespace

size_t moe_cutlass_scratch_bytes(int64_t T, int top_k, int64_t hidden, int64_t intermediate, int64_t num_experts) {
  size_t total = 0;
  carve(nullptr, T, top_k, hidden, intermediate, num_experts, &total);
  return total;
}

MoeCutlassScratch moe_cutlass_carve(void* region, int64_t T, int top_k, int64_t hidden, int64_t intermediate,
                                    int64_t num_experts) {
  size_t total = 0;
  return carve(region, T, top_k, hidden, intermediate, num_experts, &total).s;
}

cudaError_t launch_moe_cutlass(const MoeArgs& a, const MoeCutlassIo& io, void* region, cudaStream_t stream) {
  const DeviceExperts& x = a.experts;
  const int64_t T = a.T, H = x.hidden, I = x.intermediate, P = T * a.top_k;
  const int E = static_cast<int>(x.num_experts);
  if (!moe_fp8_supported(x) || E > kMoeGroupMaxExperts || P <= 0 || P > INT32_MAX || a.num_sms <= 0 || a.num_sms > kMaxSms ||
      a.top_k > kMoeMaxTopK || reinterpret_cast<uintptr_t>(a.out) % 16 != 0)
    return cudaErrorInvalidValue;
  size_t total = 0;
  const Layout l = carve(region, T, a.top_k, H, I, E, &total);
  const MoeCutlassScratch& s = l.s;
  const ArgsIn in{x, s.a1, s.sfa1, io.a2, io.sfa2, io.d1, s.d3, io.d2};
  cutlass_moe_args_kernel<<<1, 1024, 0, stream>>>(in, s, l.args);
  MoeArgs q = a;
  cudaError_t e = moe_quantize_x(q, io.x8, io.sx, stream);
  if (e != cudaSuccess) return e;
  constexpr int kThreads = 256;
  cutlass_moe_gather_kernel<<<static_cast<unsigned>(ceil_div(P * (H / 16), kThreads)), kThreads, 0, stream>>>(
      q.x8, q.sx, T, a.top_k, H, E, io.sorted, s.first, s.a1, s.sfa1, P);
  if ((e = cudaGetLastError()) != cudaSuccess) return e;
  e = P >= kMoeCutlassCooperativeMinPairs ? run_gemm<Cooperative>(l.args.up, 2 * E, a.num_sms, l, stream)
                                : run_gemm<Pingpong>(l.args.up, 2 * E, a.num_sms, l, stream);
  if (e != cudaSuccess) return e;
  const int64_t swiglu_warps = P * ceil_div(I / kKBlock, kSwigluGroups);
  cutlass_moe_swiglu_kernel<<<static_cast<unsigned>(ceil_div(swiglu_warps * kWarp, kThreads)), kThreads, 0, stream>>>(
      io.d1, s.d3, I, E, s.first, io.a2, io.sfa2, P);
  if ((e = cudaGetLastError()) != cudaSuccess) return e;
  if ((e = run_gemm<Pingpong>(l.args.down, E, a.num_sms, l, stream)) != cudaSuccess) return e;
  cutlass_moe_combine_kernel<<<static_cast<unsigned>(T), kThreads, 0, stream>>>(a, io.d2, s.row_of_pair);
  return cudaGetLastError();
}

}  // namespace m2::cuda
