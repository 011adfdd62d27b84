#include "model/sampling.h"

#include "model/backend.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

namespace m2 {

float log_sum_exp(std::span<const float> logits) {
  float m = -std::numeric_limits<float>::infinity();
  for (float v : logits) m = std::max(m, v);
  if (m == -std::numeric_limits<float>::infinity()) return m;
  double s = 0;
  for (float v : logits) s += std::exp(static_cast<double>(v - m));
  return m + static_cast<float>(std::log(s));
}

float token_logprob(std::span<const float> logits, int32_t id, float* log_normalizer) {
  const float z = log_sum_exp(logits);
  if (log_normalizer) *log_normalizer = z;
  return logits[id] - z;
}

std::vector<TokenLogprob> top_logprobs(std::span<const float> logits, int k, float log_normalizer) {
  std::vector<TokenLogprob> out;
  if (k <= 0) return out;
  std::vector<int32_t> idx(logits.size());
  std::iota(idx.begin(), idx.end(), 0);
  const size_t kk = std::min<size_t>(k, idx.size());
  auto better = [&](int32_t a, int32_t b) { return sample_rank_key(logits[a], a) > sample_rank_key(logits[b], b); };
  std::partial_sort(idx.begin(), idx.begin() + kk, idx.end(), better);
  for (size_t i = 0; i < kk; ++i) out.push_back({idx[i], logits[idx[i]] - log_normalizer});
  return out;
}

int32_t argmax_lowest_id(std::span<const float> logits) {
  int32_t best = 0;
  uint64_t best_key = 0;
  for (size_t i = 0; i < logits.size(); ++i) {
    const uint64_t k = sample_rank_key(logits[i], static_cast<int32_t>(i));
    if (k > best_key) best_key = k, best = static_cast<int32_t>(i);
  }
  return best;
}

std::vector<LogitEdit> logit_edits(const SampleRow& row) {
  std::vector<LogitEdit> e;
  auto add = [&](int32_t id, uint32_t flag) {
    e.push_back({});
    e.back().id = id;
    e.back().flags = flag;
  };
  for (int32_t id : row.banned) add(id, LogitEdit::kBanned);
  for (const LogitBias& b : row.logit_bias) add(b.id, LogitEdit::kBias), e.back().bias = b.bias;
  if (row.repetition_penalty != 1.0f) {
    for (int32_t id : row.prompt_ids) add(id, LogitEdit::kRepeat);
    for (const TokenCount& c : row.output_counts) add(c.id, LogitEdit::kRepeat);
  }
  if (row.frequency_penalty != 0.0f || row.presence_penalty != 0.0f) {
    for (const TokenCount& c : row.output_counts) {
      add(c.id, LogitEdit::kSubtract);
      e.back().subtract = row.frequency_penalty * static_cast<float>(c.count) + row.presence_penalty;
    }
  }
  // Merge the entries of each id (a token can be banned, biased and penalised).
  std::stable_sort(e.begin(), e.end(), [](const LogitEdit& a, const LogitEdit& b) { return a.id < b.id; });
  std::vector<LogitEdit> merged;
  for (const LogitEdit& x : e) {
    if (merged.empty() || merged.back().id != x.id) {
      merged.push_back(x);
      continue;
    }
    LogitEdit& m = merged.back();
    m.flags |= x.flags;
    if (x.flags & LogitEdit::kBias) m.bias = x.bias;
    if (x.flags & LogitEdit::kSubtract) m.subtract = x.subtract;
  }
  return merged;
}

SampledToken sample_row(std::span<float> logits, const SampleRow& row) {
  const int64_t V = static_cast<int64_t>(logits.size());
  SampledToken out;
  // Raw-distribution logprobs (vLLM's default logprobs mode), before any edit.
  float log_z = 0;
  if (row.logprobs >= 0) {
    log_z = log_sum_exp(logits);
    out.top = top_logprobs(logits, row.logprobs, log_z);
  }
  const std::vector<LogitEdit> edits = logit_edits(row);
  std::vector<float> raw_edited(edits.size());  // to read the chosen token's raw logprob
  for (size_t i = 0; i < edits.size(); ++i) {
    float& l = logits[edits[i].id];
    raw_edited[i] = l;
    l = apply_logit_edit(l, edits[i], row.repetition_penalty);
  }
  if (row.forced < 0 && !row.allowed.empty()) {
    // Disallowed tokens leave the draw. An edited one keeps its raw logit in
    // raw_edited, so the chosen token's raw logprob is read as before.
    for (int64_t w = 0; w < (V + 31) / 32; ++w) {
      const uint32_t bits = row.allowed[static_cast<size_t>(w)];
      if (bits == 0xffffffffu) continue;
      const int64_t end = std::min<int64_t>(V, w * 32 + 32);
      for (int64_t i = w * 32; i < end; ++i)
        if (!((bits >> (i - w * 32)) & 1u)) logits[i] = -std::numeric_limits<float>::infinity();
    }
  }

  if (row.forced >= 0) {
    out.id = row.forced;
  } else if (row.greedy()) {
    out.id = argmax_lowest_id(logits);
  } else {
    // Drawable candidates (not -inf, not NaN). Rank order (logit descending,
    // lower id first) is needed only as far as the filters walk it: top-k
    // sorts its k; top-p and min-p walk from the best, so only the prefix
    // they reach is sorted (1024 first, 8x more while the mass is short); a
    // temperature alone needs no order (the draw breaks ties by id itself).
    // On a 200K vocabulary this is ~20x faster than sorting every token.
    std::vector<int32_t> cand;
    cand.reserve(static_cast<size_t>(V));
    for (int32_t i = 0; i < V; ++i)
      if (float_order_key(logits[i]) > kNegInfOrderKey) cand.push_back(i);
    if (cand.empty()) {  // everything banned: the argmax (token 0)
      out.id = argmax_lowest_id(logits);
    } else {
      auto better = [&](int32_t a, int32_t b) { return sample_rank_key(logits[a], a) > sample_rank_key(logits[b], b); };
      size_t sorted = 0;  // cand[0, sorted) is in rank order and holds the best `sorted`
      auto sort_prefix = [&](size_t n) {
        n = std::min(n, cand.size());
        if (n <= sorted) return;
        std::partial_sort(cand.begin(), cand.begin() + static_cast<std::ptrdiff_t>(n), cand.end(), better);
        sorted = n;
      };
      size_t keep = cand.size();
      if (row.top_k > 0 && static_cast<size_t>(row.top_k) < keep) {
        keep = static_cast<size_t>(row.top_k);
        sort_prefix(keep);
      } else if (row.top_p < 1.0f || row.min_p > 0.0f) {
        sort_prefix(1024);
      } else {
        std::swap(cand[0], *std::max_element(cand.begin(), cand.end(),
                                              [&](int32_t a, int32_t b) { return better(b, a); }));
        sorted = 1;
      }
      // Weights exp((l - max) / T) of the kept candidates (the best's is 1).
      const double inv_t = 1.0 / static_cast<double>(row.temperature);
      const double top = logits[cand[0]];
      auto d_of = [&](size_t i) { return (logits[cand[i]] - top) * inv_t; };
      // The rank-order prefix up to i, sorted on demand.
      auto ranked = [&](size_t i) {
        if (i >= sorted) sort_prefix(std::max(i + 1, sorted * 8));
        return std::exp(d_of(i));
      };
      // top-p: the smallest rank prefix whose mass reaches top_p (at least one token).
      if (row.top_p < 1.0f) {
        double sum = 0;
        for (size_t i = 0; i < keep; ++i) sum += std::exp(d_of(i));
        const double target = row.top_p * sum;
        double mass = 0;
        size_t k = 0;
        while (k < keep && mass < target) mass += ranked(k++);
        keep = std::max<size_t>(k, 1);
      }
      // min-p: drop tokens below min_p x the most likely one (weight 1).
      if (row.min_p > 0.0f) {
        size_t k = 1;
        while (k < keep && ranked(k) >= row.min_p) ++k;
        keep = k;
      }
      // The draw: Gumbel-max over the kept candidates (lower id on ties).
      size_t best = 0;
      double best_key = -std::numeric_limits<double>::infinity();
      for (size_t i = 0; i < keep; ++i) {
        const double key = d_of(i) + sampling_gumbel(row.seed, row.step, static_cast<uint32_t>(cand[i]));
        if (key > best_key || (key == best_key && cand[i] < cand[best])) best_key = key, best = i;
      }
      out.id = cand[best];
    }
  }
  if (row.logprobs >= 0) {
    auto it = std::lower_bound(edits.begin(), edits.end(), out.id, [](const LogitEdit& e, int32_t id) { return e.id < id; });
    const float raw = it != edits.end() && it->id == out.id ? raw_edited[it - edits.begin()] : logits[out.id];
    out.logprob = raw - log_z;
  }
  return out;
}

Status check_sample_args(const Act& logits, std::span<const SampleRow> rows, std::span<SampledToken> out) {
  const int64_t V = logits.cols;
  if (logits.rows != static_cast<int64_t>(rows.size()) || out.size() != rows.size())
    return errorf("sample: logits [{}, {}] with {} rows of parameters and {} outputs", logits.rows, V, rows.size(),
                  out.size());
  if (V < 1 || V > kSampleMaxVocab) return errorf("sample: vocabulary {} outside [1, {}]", V, kSampleMaxVocab);
  for (size_t r = 0; r < rows.size(); ++r) {
    const SampleRow& x = rows[r];
    auto bad = [&](int64_t id) { return id < 0 || id >= V; };
    auto fail = [&](const char* what, int64_t id) {
      return errorf("sample: row {}: {} id {} outside the vocabulary [0, {})", r, what, id, V);
    };
    if (x.forced >= 0 && bad(x.forced)) return fail("forced", x.forced);
    for (int32_t id : x.banned)
      if (bad(id)) return fail("banned", id);
    for (const LogitBias& b : x.logit_bias)
      if (bad(b.id)) return fail("logit_bias", b.id);
    for (int32_t id : x.prompt_ids)
      if (bad(id)) return fail("prompt", id);
    for (const TokenCount& c : x.output_counts)
      if (bad(c.id)) return fail("output", c.id);
    if (!x.allowed.empty() && static_cast<int64_t>(x.allowed.size()) < (V + 31) / 32)
      return errorf("sample: row {}: a token mask of {} words for a vocabulary of {}", r, x.allowed.size(), V);
    if (x.logprobs > kMaxLogprobs) return errorf("sample: row {} asks for {} logprobs (at most {})", r, x.logprobs, kMaxLogprobs);
    if (!x.greedy() && !(x.top_p > 0.0f && x.top_p <= 1.0f && x.min_p >= 0.0f && x.min_p <= 1.0f))
      return errorf("sample: row {}: top_p {} or min_p {} out of range", r, x.top_p, x.min_p);
  }
  return Status();
}

}  // namespace m2
