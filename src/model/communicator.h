// Collective operations among the ranks of a tensor- or expert-parallel
// model (model/tensor_parallel.h). Every rank calls the same collectives in
// the same order; each call returns once every rank has taken part. Buffers
// are in the memory of the rank's backend (the in-process implementation:
// host memory, or a device's through stage_through_host; NCCL and a
// peer-to-peer one, later: device memory directly).
//
// Results are the same bits on every rank (the routers of all ranks read the
// reduced hidden state and must pick the same experts), so a sum is formed
// once, in rank order, and copied to every rank.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace m2 {

class Backend;  // model/backend.h

// Thrown by a collective of a group one of whose ranks has aborted
// (Communicator::abort); what() names that rank and its error.
class CollectiveAborted : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;

  // data[0, n) on every rank becomes the element-wise sum over the ranks
  // (fp32, summed in rank order 0, 1, ..., size-1).
  virtual void all_reduce_sum(float* data, int64_t n) = 0;
  // out [size, n] on every rank: rank r's in[0, n) at out + r*n.
  virtual void all_gather(const float* in, int64_t n, float* out) = 0;
  // root's data[0, bytes) to every rank's data.
  virtual void broadcast(void* data, size_t bytes, int root) = 0;
  // Returns once every rank has called it.
  virtual void barrier() = 0;
  // This rank has failed (`why`): every rank of the group waiting in a
  // collective, or entering one later, stops with CollectiveAborted naming
  // this rank and why, instead of waiting for it forever. The group is then
  // unusable. Host communicators implement it; the peer-to-peer kernels
  // instead stop after their timeout.
  virtual void abort(const std::string& why) {}
  // The collectives are ops queued on the rank backend's stream (a GPU
  // kernel), not host work: a step that calls them may be recorded and
  // replayed (Backend::begin_step) like any other op.
  virtual bool queued_on_stream() const { return false; }
};

// `size` communicators of one group whose ranks are threads of this process
// (the CPU ranks; the oracle of the GPU ones): communicator r is rank r and
// must be used by one thread at a time. Every rank must call every
// collective: a rank that skips one leaves the others waiting. A failure
// (abort) names communicator r as rank first_rank + r of named_size (a node's
// ranks of a multi-node group: model/node_group.h; 0: size).
std::vector<std::unique_ptr<Communicator>> make_local_communicators(int size, int first_rank = 0, int named_size = 0);

// `inner` (host buffers) for a rank whose collectives name buffers in
// `backend`'s memory (a GPU's): each collective copies them to the host,
// runs inner's on the copies and copies the result back, so the group's
// results are inner's bits. Slow (a round trip per collective): the oracle
// and the fallback of a device communicator (NCCL, peer to peer).
std::unique_ptr<Communicator> stage_through_host(std::unique_ptr<Communicator> inner, Backend& backend);

}  // namespace m2
