#include "backend/cuda/runtime/op_profile.h"

#include <algorithm>

#include "util/log.h"

namespace m2::cuda {

OpProfile::Scope::Scope(OpProfile* p, cudaStream_t s, std::string key) : p_(p), s_(s), key_(std::move(key)) {
  start_ = p_->event();
  cudaEventRecord(start_, s_);
}

OpProfile::Scope::~Scope() {
  if (!p_) return;
  cudaEvent_t end = p_->event();
  cudaEventRecord(end, s_);
  p_->done(std::move(key_), start_, end);
}

cudaEvent_t OpProfile::event() {
  if (free_.empty()) {
    cudaEvent_t e = nullptr;
    cudaEventCreate(&e);
    return e;
  }
  cudaEvent_t e = free_.back();
  free_.pop_back();
  return e;
}

void OpProfile::done(std::string key, cudaEvent_t start, cudaEvent_t end) {
  pending_.push_back({std::move(key), start, end});
  if (pending_.size() >= 4096) flush();  // bounded event pool
}

void OpProfile::flush() {
  for (Pending& p : pending_) {
    cudaEventSynchronize(p.end);
    float ms = 0;
    if (cudaEventElapsedTime(&ms, p.start, p.end) == cudaSuccess) {
      Total& t = totals_[p.key];
      ++t.calls;
      t.ms += ms;
    }
    free_.push_back(p.start);
    free_.push_back(p.end);
  }
  pending_.clear();
}

OpProfile::~OpProfile() {
  flush();
  for (cudaEvent_t e : free_) cudaEventDestroy(e);
  std::vector<std::pair<std::string, Total>> rows(totals_.begin(), totals_.end());
  std::sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) { return a.second.ms > b.second.ms; });
  double all = 0;
  for (const auto& [key, t] : rows) all += t.ms;
  log_info("CUDA op profile (GPU time per op, launch gaps included; {:.1f} ms in all):", all);
  log_info("  {:<48} {:>8} {:>11} {:>10} {:>6}", "op", "calls", "total ms", "mean us", "share");
  for (const auto& [key, t] : rows)
    log_info("  {:<48} {:>8} {:>11.3f} {:>10.2f} {:>5.1f}%", key, t.calls, t.ms, 1e3 * t.ms / t.calls,
             100.0 * t.ms / std::max(all, 1e-9));
}

}  // namespace m2::cuda
