// The MiniMax QK step in one kernel, one block per token: full-width RMSNorm
// of q [q_dim] and k [kv_dim] (one mean of squares over all heads, spec
// §2.2c), then partial NeoX RoPE on the first rotary_dim dims of every head.
//
// Tensor parallelism: a rank holds a slice of the heads, so the kernel first
// reduces its local sums of squares of q and k (a [T, 2] quantity), then
// divides by the *global* widths (q_norm_width, kv_norm_width). A TP version
// all-reduces those two sums between the two phases (one-shot, inside the
// same kernel or between a stats and an apply kernel); on one GPU the local
// sums are the global ones.
//
// Rounding follows the CPU backend op for op: fp64 statistics and angles,
// (x * inv) * w, then a*c - b*s and b*c + a*s without fused multiply-adds.
#include "backend/cuda/common.cuh"
#include "backend/cuda/kernels.h"

namespace m2::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kMaxHalfRotary = 64;

__device__ double sum_squares(const float* x, int64_t n) {
  double s = 0;
  for (int64_t j = threadIdx.x; j < n; j += blockDim.x) s += static_cast<double>(x[j]) * x[j];
  return s;
}

// Normalises (when `norm` is set) and rotates one token's heads in place.
__device__ void norm_rope_row(float* x, int64_t width, const void* norm, DType norm_dtype, float inv, int head_dim,
                              int rotary_dim, const float* cs) {
  const int half = rotary_dim / 2;
  auto normed = [&](int64_t j) { return norm ? __fmul_rn(__fmul_rn(x[j], inv), load_any(norm, norm_dtype, j)) : x[j]; };
  for (int64_t j = threadIdx.x; j < width; j += blockDim.x) {
    const int d = static_cast<int>(j % head_dim);
    if (d < half) {
      const float a = normed(j), b = normed(j + half);
      const float c = cs[d], s = cs[kMaxHalfRotary + d];
      x[j] = __fsub_rn(__fmul_rn(a, c), __fmul_rn(b, s));
      x[j + half] = __fadd_rn(__fmul_rn(b, c), __fmul_rn(a, s));
    } else if (d >= rotary_dim) {
      x[j] = normed(j);
    }
  }
}

__global__ void __launch_bounds__(kThreads) qk_norm_rope_kernel(QkNormRopeArgs a) {
  __shared__ double scratch[kWarp];
  __shared__ float cs[2 * kMaxHalfRotary];  // cos θ_i, then sin θ_i
  float* q = a.q + blockIdx.x * a.q_dim;
  float* k = a.k + blockIdx.x * a.kv_dim;

  // Phase 1: the per-token sums of squares (the quantity a TP group all-reduces).
  const double ss_q = a.q_norm ? block_sum(sum_squares(q, a.q_dim), scratch) : 0.0;
  const double ss_k = a.k_norm ? block_sum(sum_squares(k, a.kv_dim), scratch) : 0.0;
  const double eps = a.eps;
  const float inv_q = static_cast<float>(1.0 / sqrt(ss_q / static_cast<double>(a.q_norm_width) + eps));
  const float inv_k = static_cast<float>(1.0 / sqrt(ss_k / static_cast<double>(a.kv_norm_width) + eps));

  // Rotary angles of this position: θ_i = pos · theta^(-2i / rotary_dim).
  const int half = a.rotary_dim / 2;
  if (threadIdx.x < half) {
    const int i = threadIdx.x;
    const double angle = a.positions[blockIdx.x] * (1.0 / pow(a.theta, (2.0 * i) / a.rotary_dim));
    cs[i] = static_cast<float>(cos(angle));
    cs[kMaxHalfRotary + i] = static_cast<float>(sin(angle));
  }
  // Everyone has read q and k for the statistics before anyone writes them.
  __syncthreads();

  // Phase 2: normalise and rotate.
  norm_rope_row(q, a.q_dim, a.q_norm, a.q_norm_dtype, inv_q, a.head_dim, a.rotary_dim, cs);
  norm_rope_row(k, a.kv_dim, a.k_norm, a.k_norm_dtype, inv_k, a.head_dim, a.rotary_dim, cs);
}

}  // namespace

cudaError_t launch_qk_norm_rope(const QkNormRopeArgs& a, cudaStream_t stream) {
  if (a.rotary_dim / 2 > kMaxHalfRotary || a.rotary_dim % 2 != 0 || a.rotary_dim > a.head_dim)
    return cudaErrorInvalidValue;
  qk_norm_rope_kernel<<<static_cast<unsigned>(a.T), kThreads, 0, stream>>>(a);
  return cudaGetLastError();
}

}  // namespace m2::cuda
