// Host-side diagnosis of a GEMM output that failed its check against a
// reference (bench/cutlass_moe_bench.cu): sample values, where the bad
// elements are, and which kind of factor (if any) explains the error. Plain
// C++ so that it can be tried on the host without a GPU.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <vector>

namespace m2bench {

constexpr int kCols = 128;  // a B scale covers 128 output columns (128 x 128 weight blocks)

// Least-squares factor f of d ~ f * ref over rows [m0, m1) x columns
// [n0, n1) of row-major [M, N] outputs, and the residual |d - f ref| / |ref|.
struct Fit {
  double f = 0, res = INFINITY;
};
inline Fit fit(const std::vector<float>& d, const std::vector<float>& ref, int N, int m0, int m1, int n0, int n1) {
  double dr = 0, rr = 0, dd = 0;
  for (int m = m0; m < m1; ++m)
    for (int n = n0; n < n1; ++n) {
      const double x = d[int64_t{m} * N + n], y = ref[int64_t{m} * N + n];
      dr += x * y, rr += y * y, dd += x * x;
    }
  Fit f;
  if (rr > 0) f = {dr / rr, std::sqrt(std::max(0.0, dd - dr * dr / rr) / rr)};
  return f;
}
// The worst residual when every block of rows x cols has a factor of its own.
inline double worst_fit(const std::vector<float>& d, const std::vector<float>& ref, int M, int N, int rows, int cols) {
  double w = 0;
  for (int m = 0; m < M; m += rows)
    for (int n = 0; n < N; n += cols) w = std::max(w, fit(d, ref, N, m, std::min(M, m + rows), n, n + cols).res);
  return w;
}

// What a failed output d [M, N] (row-major) looks like beside ref: a few
// values, where the bad elements are (relative error above limit, relative to
// |ref| floored at 1e-3 amax as the check does), and whether the error is a
// factor (uniform; per row = A scales; per 128 columns = B scales) or
// structured (A/B data addressed wrongly, or scales wrong per k block, e.g.
// a wrong SFA k-block stride: each output mixes several k blocks).
inline void describe_mismatch(const std::vector<float>& d, const std::vector<float>& ref, int M, int N, double amax,
                              double limit) {
  auto bad = [&](int64_t i) {
    return !(std::fabs(d[i] - ref[i]) <= limit * std::max(std::fabs(static_cast<double>(ref[i])), 1e-3 * amax));
  };
  int64_t nbad = 0, nnan = 0;
  int bad_rows = 0, zero_rows = 0, first_bad_row = -1;
  std::vector<int64_t> samples;
  std::vector<char> bad_cols(N / kCols, 0);
  for (int m = 0; m < M; ++m) {
    bool row_bad = false, row_zero = true;
    for (int n = 0; n < N; ++n) {
      const int64_t i = int64_t{m} * N + n;
      nnan += std::isnan(d[i]);
      row_zero = row_zero && d[i] == 0;
      if (!bad(i)) continue;
      ++nbad, row_bad = true, bad_cols[n / kCols] = 1;
      if (samples.size() < 4) samples.push_back(i);
    }
    bad_rows += row_bad, zero_rows += row_zero;
    if (row_bad && first_bad_row < 0) first_bad_row = m;
  }
  for (int64_t i : {int64_t{0}, int64_t{kCols}, int64_t{M} * N - 1})
    if (i < int64_t{M} * N && std::find(samples.begin(), samples.end(), i) == samples.end()) samples.push_back(i);
  std::printf("    first failing group, M=%d N=%d: %lld of %lld elements off (in %d of %d rows, from row %d; %d of %d "
              "128-column blocks), %lld NaN, %d rows all zero\n",
              M, N, static_cast<long long>(nbad), static_cast<long long>(int64_t{M} * N), bad_rows, M, first_bad_row,
              static_cast<int>(std::count(bad_cols.begin(), bad_cols.end(), 1)), N / kCols,
              static_cast<long long>(nnan), zero_rows);
  for (int64_t i : samples)
    std::printf("      (%4lld, %4lld) cutlass %+.6e  ref %+.6e  ratio %+.4f\n", static_cast<long long>(i / N),
                static_cast<long long>(i % N), d[i], ref[i], ref[i] != 0 ? d[i] / ref[i] : 0.0);
  constexpr double tol = 1e-2;  // a fitted factor explains the error to 1 %
  const Fit all = fit(d, ref, N, 0, M, 0, N);
  const double per_row = worst_fit(d, ref, M, N, 1, N), per_cols = worst_fit(d, ref, M, N, M, kCols),
               per_both = worst_fit(d, ref, M, N, 1, kCols);
  std::printf("      residual with one factor per group %.2e (factor %.4g), per row %.2e, per 128 columns %.2e, "
              "per row x 128 columns %.2e\n",
              all.res, all.f, per_row, per_cols, per_both);
  if (zero_rows == M) {
    std::printf("      => all zero: nothing written here (the group's tiles skipped, or D addressed elsewhere)\n");
  } else if (all.res < tol) {
    std::printf("      => uniform: every element %.4g x the reference (one factor: alpha, or a scale for all)\n", all.f);
  } else if (per_row < tol) {
    std::printf("      => a factor per row (rows 0..3:");
    for (int m = 0; m < std::min(M, 4); ++m) std::printf(" %.4g", fit(d, ref, N, m, m + 1, 0, N).f);
    std::printf("): the rows' A scales (SFA) are wrong, the data right\n");
  } else if (per_cols < tol) {
    std::printf("      => a factor per 128 columns: the B scales (SFB) are wrong, the data right\n");
  } else if (per_both < tol) {
    std::printf("      => a factor per row and 128 columns: A and B scales wrong, the data right\n");
  } else if (first_bad_row >= 0) {
    // Rows shifted or swapped: the reference row closest to the first bad one.
    int best = -1;
    double best_res = INFINITY;
    for (int m = 0; m < M; ++m) {
      double num = 0, den = 0;
      for (int n = 0; n < N; ++n) {
        const double x = d[int64_t{first_bad_row} * N + n], y = ref[int64_t{m} * N + n];
        num += (x - y) * (x - y), den += y * y;
      }
      if (den > 0 && std::sqrt(num / den) < best_res) best = m, best_res = std::sqrt(num / den);
    }
    if (best != first_bad_row && best_res < tol)
      std::printf("      => row %d holds the reference's row %d: A rows addressed wrongly (pointer or stride)\n",
                  first_bad_row, best);
    else
      std::printf("      => structured, no factor explains it: scales wrong per k block (e.g. the SFA k-block stride), "
                  "or A/B data addressed wrongly\n");
  }
}

}  // namespace m2bench
