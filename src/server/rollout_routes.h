// The rollout routes of an RL trainer (SGLang's names; docs/rollout.md):
//   GET  /get_model_info, /get_weight_version          always served (the /v1 key when one is set)
//   POST /pause_generation {mode}                       with --enable-weight-updates
//   POST /continue_generation, /flush_cache
//   POST /update_weights_from_disk {model_path, weight_version}
//   POST /update_weights_from_tensor?bucket_set=&bucket_index=&bucket_count=  (body: safetensors)
//   POST /init_weights_update_group, /update_weights_from_distributed: 501 (needs the many-GPU work)
// The POST routes need --enable-weight-updates (else 404) and, when set,
// --admin-api-key (else the --api-key, when set).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "model/weight_update.h"
#include "server/http_server.h"
#include "server/server_context.h"
#include "server/weight_buckets.h"

namespace m2::server {

// The served weight set and its version; updates build a new set on a
// request thread and swap it in on the engine thread between two steps.
class RolloutControl {
 public:
  // `model_path`: the model directory's name (answers carry no server paths).
  // `reads_weight_views`: the backend's (Backend::reads_weight_views). When
  // true a disk update's bytes are copied out of the files; else they are
  // streamed from the mapping by the backend's update_weights, and every
  // update's host bytes are released once swapped in (release_replaced_bytes).
  RolloutControl(std::shared_ptr<WeightSet> loaded, std::string model_path, bool reads_weight_views)
      : current_(std::move(loaded)), model_path_(std::move(model_path)), reads_weight_views_(reads_weight_views) {}

  const ModelConfig& config() const { return current_->weights().config; }  // never changes
  const std::string& model_path() const { return model_path_; }
  bool backend_reads_weight_views() const { return reads_weight_views_; }
  int64_t version() const { return version_.load(); }
  std::string version_label() const;
  std::shared_ptr<WeightSet> current() const;

  // One update at a time: false while another one runs (its caller answers 409).
  bool try_begin() { return !updating_.exchange(true); }
  void end() { updating_.store(false); }
  // After the engine swapped to `next`: it is current, the version is bumped,
  // the old set is released (no step reads it any more).
  void commit(std::shared_ptr<WeightSet> next, const std::string& label);

  WeightBuckets buckets;

 private:
  mutable std::mutex mu_;
  std::shared_ptr<WeightSet> current_;
  std::string label_;
  std::string model_path_;
  bool reads_weight_views_ = true;
  std::atomic<int64_t> version_{0};
  std::atomic<bool> updating_{false};
};

bool is_rollout_route(const std::string& path);
// On a request thread (reads and copies tensors). Answers every request.
void handle_rollout_route(ServerContext& ctx, std::shared_ptr<HttpRequest> request,
                          std::shared_ptr<ResponseWriter> writer);

}  // namespace m2::server
