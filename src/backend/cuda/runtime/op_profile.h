// GPU time per op of real steps, for finding where a decode step goes
// (M2CPP_CUDA_OPTIONS=profile=on; it turns step graphs off, since a replayed graph
// has no per-op boundaries). Each op's launches are bracketed by CUDA
// events; the times are summed per key (op name and shape) and printed as a
// table when the backend is destroyed. An op's time includes the gap before
// its first kernel starts, as it would be without a graph.
#pragma once

#include <cuda_runtime.h>

#include <map>
#include <string>
#include <vector>

namespace m2::cuda {

class OpProfile {
 public:
  class Scope {
   public:
    Scope() = default;
    Scope(OpProfile* p, cudaStream_t s, std::string key);
    Scope(Scope&& o) noexcept : p_(o.p_), s_(o.s_), key_(std::move(o.key_)), start_(o.start_) { o.p_ = nullptr; }
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;
    Scope& operator=(Scope&&) = delete;
    ~Scope();

   private:
    OpProfile* p_ = nullptr;
    cudaStream_t s_ = nullptr;
    std::string key_;
    cudaEvent_t start_ = nullptr;
  };

  OpProfile() = default;
  OpProfile(const OpProfile&) = delete;
  OpProfile& operator=(const OpProfile&) = delete;
  ~OpProfile();  // prints the table

 private:
  cudaEvent_t event();
  void done(std::string key, cudaEvent_t start, cudaEvent_t end);
  void flush();  // waits for the recorded events and adds their times

  struct Pending {
    std::string key;
    cudaEvent_t start, end;
  };
  struct Total {
    int64_t calls = 0;
    double ms = 0;
  };
  std::vector<Pending> pending_;
  std::vector<cudaEvent_t> free_;
  std::map<std::string, Total> totals_;
};

}  // namespace m2::cuda
