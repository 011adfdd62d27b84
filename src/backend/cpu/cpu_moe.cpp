// Sigmoid top-k router and SwiGLU experts on the CPU.
#include <algorithm>
#include <cfloat>
#include <cmath>
#include <numeric>

#include "backend/cpu/cpu_backend.h"

namespace m2::cpu {

void CpuBackend::route(Act x, const Weight& gate, const Weight& bias, int top_k, float scaling,
                       Routing out) {
  const int64_t T = x.rows;
  const int64_t E = gate.shape[0];
  router_logits_.resize(static_cast<size_t>(T * E));
  matmul_ref(x.data, T, x.cols, weight_ref(gate), E, router_logits_.data());  // fp32 router GEMM
  std::vector<float> b(E, 0.0f);
  if (!bias.empty()) k_.to_f32(bias.dtype, bias.data, b.data(), E);
  std::vector<float> score(E), biased(E);
  std::vector<int32_t> order(E);
  for (int64_t t = 0; t < T; ++t) {
    const float* lg = router_logits_.data() + t * E;
    for (int64_t e = 0; e < E; ++e) {
      score[e] = static_cast<float>(1.0 / (1.0 + std::exp(-static_cast<double>(lg[e]))));
      const float v = score[e] + b[e];  // the bias decides selection only
      biased[e] = std::isnan(v) ? -FLT_MAX : v;  // NaN ranks last (and keeps the sort's order strict)
    }
    std::iota(order.begin(), order.end(), 0);
    // Largest biased score first; ties go to the lower expert id.
    std::partial_sort(order.begin(), order.begin() + top_k, order.end(), [&](int32_t a, int32_t c) {
      return biased[a] != biased[c] ? biased[a] > biased[c] : a < c;
    });
    double sum = 0;
    for (int j = 0; j < top_k; ++j) sum += score[order[j]];
    for (int j = 0; j < top_k; ++j) {
      out.expert_ids[t * top_k + j] = order[j];
      out.weights[t * top_k + j] = static_cast<float>(score[order[j]] / sum * scaling);
    }
  }
}

void CpuBackend::route_forced(Act x, const Weight& gate, const Weight& bias, int top_k, float scaling,
                              std::span<const int32_t> forced, Routing out) {
  route(x, gate, bias, top_k, scaling, out);  // leaves router_logits_ [T, E]
  const int64_t E = gate.shape[0];
  for (int64_t t = 0; t < x.rows; ++t) {
    const int32_t* ids = forced.data() + t * top_k;
    if (ids[0] < 0) continue;
    const float* lg = router_logits_.data() + t * E;
    // The same sigmoid and sum order as route(), over the given experts.
    double sum = 0;
    std::vector<float> score(top_k);
    for (int j = 0; j < top_k; ++j) {
      score[j] = static_cast<float>(1.0 / (1.0 + std::exp(-static_cast<double>(lg[ids[j]]))));
      sum += score[j];
    }
    for (int j = 0; j < top_k; ++j) {
      out.expert_ids[t * top_k + j] = ids[j];
      out.weights[t * top_k + j] = static_cast<float>(score[j] / sum * scaling);
    }
  }
}

void CpuBackend::moe(Act x, const LayerWeights& layer, const Routing& routing, Act out, const ActCopy&) {
  const int64_t T = x.rows, H = x.cols;
  const int64_t E = static_cast<int64_t>(layer.experts.size());
  const int k = routing.top_k;
  // Group (token, weight) pairs by expert; ascending expert id per token keeps
  // each token's sum in a fixed order whatever else is in the batch.
  std::vector<std::vector<std::pair<int64_t, float>>> by_expert(E);
  for (int64_t t = 0; t < T; ++t)
    for (int j = 0; j < k; ++j)
      by_expert[routing.expert_ids[t * k + j]].push_back({t, routing.weights[t * k + j]});
  if (T * k <= kSmallMoePairs) return moe_small(x, layer, by_expert, out);
  std::fill(out.data, out.data + T * H, 0.0f);
  for (int64_t e = 0; e < E; ++e) {
    const auto& toks = by_expert[e];
    const ExpertWeights& ew = layer.experts[e];
    if (toks.empty() || ew.w1.weight.empty()) continue;  // (empty: another rank's expert)
    const int64_t n = static_cast<int64_t>(toks.size());
    const int64_t I = ew.w1.out_features();
    moe_in_.resize(static_cast<size_t>(n * H));
    moe_gate_.resize(static_cast<size_t>(n * I));
    moe_up_.resize(static_cast<size_t>(n * I));
    moe_out_.resize(static_cast<size_t>(n * H));
    for (int64_t i = 0; i < n; ++i) std::copy_n(x.data + toks[i].first * H, H, moe_in_.data() + i * H);
    // Gate and up projections and silu(gate) * up in one pass over rows of I.
    const WeightRef w1 = weight_ref(ew.w1), w3 = weight_ref(ew.w3);
    auto gate_up = [&](int64_t b, int64_t e2, int) {
      k_.matmul(moe_in_.data(), n, H, H, w1, b, e2, moe_gate_.data(), I);
      k_.matmul(moe_in_.data(), n, H, H, w3, b, e2, moe_up_.data(), I);
      for (int64_t i = 0; i < n; ++i) {
        for (int64_t c = b; c < e2; ++c) {
          const float g = moe_gate_[i * I + c];
          moe_gate_[i * I + c] = g / (1.0f + std::exp(-g)) * moe_up_[i * I + c];
        }
      }
    };
    if (n * I * H < (1 << 18)) {
      gate_up(0, I, 0);
    } else {
      pool_.parallel_ranges(I, 4, gate_up);
    }
    matmul_ref(moe_gate_.data(), n, I, weight_ref(ew.w2), H, moe_out_.data());
    for (int64_t i = 0; i < n; ++i) {
      float* o = out.data + toks[i].first * H;
      const float w = toks[i].second;
      const float* y = moe_out_.data() + i * H;
      for (int64_t c = 0; c < H; ++c) o[c] += w * y[c];
    }
  }
}

void CpuBackend::moe_small(Act x, const LayerWeights& layer,
                           const std::vector<std::vector<std::pair<int64_t, float>>>& by_expert, Act out) {
  const int64_t H = x.cols;
  // The active experts and where their rows start in the packed buffers.
  struct Active {
    int64_t expert, first, n;
  };
  std::vector<Active> active;
  int64_t rows = 0;
  for (int64_t e = 0; e < static_cast<int64_t>(by_expert.size()); ++e)
    if (!by_expert[e].empty() && !layer.experts[e].w1.weight.empty())  // (empty: another rank's expert)
      active.push_back({e, rows, static_cast<int64_t>(by_expert[e].size())}), rows += by_expert[e].size();
  if (active.empty()) return void(std::fill(out.data, out.data + x.rows * H, 0.0f));
  const int64_t I = layer.experts[active[0].expert].w1.out_features();
  moe_in_.resize(static_cast<size_t>(rows * H));
  moe_gate_.resize(static_cast<size_t>(rows * I));
  moe_up_.resize(static_cast<size_t>(rows * I));
  moe_out_.resize(static_cast<size_t>(rows * H));
  for (const Active& a : active)
    for (int64_t i = 0; i < a.n; ++i)
      std::copy_n(x.data + by_expert[a.expert][i].first * H, H, moe_in_.data() + (a.first + i) * H);
  // Gate and up of every active expert in one parallel region over
  // (expert, block of kRowBlock rows), then the down projections likewise:
  // two regions a layer instead of two per expert.
  constexpr int64_t kRowBlock = 64;
  const int64_t up_blocks = (I + kRowBlock - 1) / kRowBlock, down_blocks = (H + kRowBlock - 1) / kRowBlock;
  const int64_t n_active = static_cast<int64_t>(active.size());
  pool_.parallel_for(n_active * up_blocks, [&](int64_t task, int) {
    const Active& a = active[task / up_blocks];
    const int64_t b = task % up_blocks * kRowBlock, e2 = std::min(I, b + kRowBlock);
    const ExpertWeights& ew = layer.experts[a.expert];
    const float* in = moe_in_.data() + a.first * H;
    float* gate = moe_gate_.data() + a.first * I;
    float* up = moe_up_.data() + a.first * I;
    k_.matmul(in, a.n, H, H, weight_ref(ew.w1), b, e2, gate, I);
    k_.matmul(in, a.n, H, H, weight_ref(ew.w3), b, e2, up, I);
    for (int64_t i = 0; i < a.n; ++i)
      for (int64_t c = b; c < e2; ++c) {
        const float g = gate[i * I + c];
        gate[i * I + c] = g / (1.0f + std::exp(-g)) * up[i * I + c];
      }
  });
  pool_.parallel_for(n_active * down_blocks, [&](int64_t task, int) {
    const Active& a = active[task / down_blocks];
    const int64_t b = task % down_blocks * kRowBlock, e2 = std::min(H, b + kRowBlock);
    k_.matmul(moe_gate_.data() + a.first * I, a.n, I, I, weight_ref(layer.experts[a.expert].w2), b, e2,
              moe_out_.data() + a.first * H, H);
  });
  // The weighted sum in ascending expert order per token, as moe() adds.
  std::fill(out.data, out.data + x.rows * H, 0.0f);
  for (const Active& a : active)
    for (int64_t i = 0; i < a.n; ++i) {
      const auto [t, w] = by_expert[a.expert][i];
      float* o = out.data + t * H;
      const float* y = moe_out_.data() + (a.first + i) * H;
      for (int64_t c = 0; c < H; ++c) o[c] += w * y[c];
    }
}

}  // namespace m2::cpu
