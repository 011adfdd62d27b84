// stage_through_host (model/communicator.h): a rank's collectives over
// buffers in its backend's memory, run by an in-process communicator on host
// copies of them.
#include <vector>

#include "model/backend.h"
#include "model/communicator.h"

namespace m2 {
namespace {

class StagedCommunicator final : public Communicator {
 public:
  StagedCommunicator(std::unique_ptr<Communicator> inner, Backend& backend)
      : inner_(std::move(inner)), backend_(backend) {}

  int rank() const override { return inner_->rank(); }
  int size() const override { return inner_->size(); }

  void all_reduce_sum(float* data, int64_t n) override {
    float* h = stage(a_, n);
    backend_.copy_to_host(data, h, bytes(n));  // (waits for the ops that wrote data)
    inner_->all_reduce_sum(h, n);
    backend_.copy_from_host(h, data, bytes(n));
  }

  void all_gather(const float* in, int64_t n, float* out) override {
    float* h_in = stage(a_, n);
    float* h_out = stage(b_, n * size());
    backend_.copy_to_host(in, h_in, bytes(n));
    inner_->all_gather(h_in, n, h_out);
    backend_.copy_from_host(h_out, out, bytes(n * size()));
  }

  void broadcast(void* data, size_t n, int root) override {
    auto* h = reinterpret_cast<uint8_t*>(stage(a_, static_cast<int64_t>((n + 3) / 4)));
    if (rank() == root) backend_.copy_to_host(data, h, n);
    inner_->broadcast(h, n, root);
    if (rank() != root) backend_.copy_from_host(h, data, n);
  }

  void barrier() override { inner_->barrier(); }
  void abort(const std::string& why) override { inner_->abort(why); }

 private:
  static size_t bytes(int64_t floats) { return static_cast<size_t>(floats) * sizeof(float); }
  // (A host copy queued by copy_from_host has left the buffer when the call
  // returns: the buffer is reused by the next collective.)
  static float* stage(std::vector<float>& v, int64_t n) {
    if (static_cast<int64_t>(v.size()) < n) v.resize(static_cast<size_t>(n));
    return v.data();
  }
  std::unique_ptr<Communicator> inner_;
  Backend& backend_;
  std::vector<float> a_, b_;
};

}  // namespace

std::unique_ptr<Communicator> stage_through_host(std::unique_ptr<Communicator> inner, Backend& backend) {
  return std::make_unique<StagedCommunicator>(std::move(inner), backend);
}

}  // namespace m2
