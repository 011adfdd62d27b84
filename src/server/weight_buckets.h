// The bucket sets of POST /update_weights_from_tensor (docs/rollout.md): a
// trainer sends one set of tensors as `count` safetensors buckets, each
// naming the set and its index; the set's tensors are applied together once
// every bucket has arrived. One set is assembled at a time: a bucket of
// another set drops the incomplete one (nothing of it is applied). Bytes
// held are bounded by the model's size: every tensor is checked against the
// served set before it is kept, and may appear once per set.
#pragma once

#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "model/weight_update.h"

namespace m2::server {

struct BucketHeader {
  std::string set_id;
  int64_t index = 0;
  int64_t count = 0;
};

class WeightBuckets {
 public:
  struct Added {
    bool complete = false;
    int64_t received = 0;                // buckets of the set so far
    std::vector<UpdateTensor> tensors;   // the whole set, when complete
    std::string dropped_set;             // an incomplete set this bucket displaced
  };
  // Adds one bucket (its tensors already checked against the served set).
  // Errors (index outside [0, count), a count that differs from the set's, a
  // bucket sent twice, a tensor already in another bucket of the set) drop
  // the set.
  Result<Added> add(const BucketHeader& header, std::vector<UpdateTensor> tensors);
  // Drops a set (its update failed); nothing if it is not pending.
  void drop(const std::string& set_id);
  // The pending set's id and buckets received, for get_model_info.
  std::optional<std::pair<std::string, int64_t>> pending() const;

 private:
  mutable std::mutex mu_;
  std::string set_id_;  // empty: none pending
  int64_t count_ = 0;
  std::set<int64_t> received_;
  std::set<std::string> names_;
  std::vector<UpdateTensor> tensors_;
};

// The header from the query string (bucket_set, bucket_index, bucket_count)
// or else from the bucket's safetensors __metadata__ (same keys).
Result<BucketHeader> bucket_header(const std::map<std::string, std::string>& query,
                                   const std::map<std::string, std::string>& metadata);

// "a=1&b=x%20y" -> {a: 1, b: "x y"}; a repeated key keeps its first value.
std::map<std::string, std::string> parse_query(std::string_view target);

}  // namespace m2::server
