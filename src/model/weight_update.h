// Weight updates of a served model (docs/rollout.md): new values for some or
// all of its tensors, from a checkpoint directory or from safetensors bytes
// (the HTTP buckets of /update_weights_from_tensor), checked against the
// served set before anything is replaced, and built into a new weight set
// that shares every tensor it does not replace. The server swaps sets
// between two engine steps (Engine::swap_weights), so a failed update leaves
// the old set serving and no step sees a half-updated one.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "model/weights.h"

namespace m2 {

// One tensor of an update. Its bytes are owned (copied out of the request
// body, or out of the file for a backend that reads the weight views, so the
// trainer may rewrite its files at once) or view the mapped file, the
// pointer keeping the mapping alive (read_update_dir for the other backends:
// their update_weights copies the bytes before the update is answered, and
// nothing reads them after it).
struct UpdateTensor {
  std::string name;
  DType dtype = DType::kF32;
  Shape shape;
  std::shared_ptr<const uint8_t[]> data;  // shape x dtype bytes
  std::string source;                     // for messages: the file or bucket it came from
};

// A served weight set: the loaded one, or one built by an update from it.
// Views of tensors never replaced point into `origin` (the load's mapping or
// dummy buffers); `replaced` owns the bytes of every tensor replaced since the
// load (the latest value of each), so memory stays the load plus one copy of
// the replaced tensors however many updates run; on a GPU none of them once
// swapped in (release_replaced_bytes).
struct WeightSet {
  std::shared_ptr<ModelWeights> origin;  // the load
  std::unique_ptr<ModelWeights> rebound;  // null for the load itself
  std::map<std::string, std::shared_ptr<const uint8_t[]>> replaced;
  // Address space that released tensors' views point into (release_replaced_bytes).
  struct StandIn {
    std::shared_ptr<void> region;
    uint64_t bytes = 0;
  };
  std::vector<StandIn> stand_ins;

  ModelWeights& weights() { return rebound ? *rebound : *origin; }
  const ModelWeights& weights() const { return rebound ? *rebound : *origin; }
};

std::shared_ptr<WeightSet> wrap_loaded_weights(std::unique_ptr<ModelWeights> loaded);

// For a backend that computes from copies of its own (Backend::
// reads_weight_views false), once `set` is swapped in: the host bytes of the
// tensors replaced since the load are not read again, so they are released
// (heap copies freed, mapped files' views dropped) and their views point at
// reserved inaccessible address space instead (a read faults rather than
// reading garbage). Each address stays unique while a set holds it, so the
// next update still tells which tensors it changes by their views (Backend::
// update_weights), and a host keeps no copy of a model it updates each step.
Status release_replaced_bytes(WeightSet& set);

// Every tensor view of a weight set by checkpoint name (the tied lm_head is
// the embedding: not listed twice).
std::map<std::string, TensorView> weight_views(const ModelWeights& w);

// Checks each tensor of `updates` against the served set: a tensor of the
// served model, at most once, with the served shape and dtype (except a
// BF16 / F16 / F32 lm_head.weight for a head served in FP8 by --lm-head-dtype
// fp8, which build_updated_weights quantises as the load did).
Status check_update_tensors(const ModelWeights& served, std::span<const UpdateTensor> updates);

// Checks `updates` against `current` (each a tensor of the served model,
// at most once, with the served shape and dtype; an F8_E4M3 weight and its
// weight_scale_inv replaced together) and builds the new set. Errors name
// the tensor and where it came from; `current` is never changed. `source`:
// the checkpoint the updates view, if they do (the new set's `checkpoint`,
// which update_weights streams from in file order).
Result<std::shared_ptr<WeightSet>> build_updated_weights(const WeightSet& current, std::vector<UpdateTensor> updates,
                                                         std::shared_ptr<Checkpoint> source = nullptr);

// The tensors of a checkpoint directory in the official layout (index +
// shards, or one model.safetensors), all of them or any subset: opened with
// the loader's validation, config.json (when present) checked against the
// served config, tensors of layers the server does not run (MTP, --num-layers
// cuts) skipped. `copy`: the bytes copied out of the files (a backend that
// reads the weight views), else viewed in the mapping (`checkpoint`).
struct UpdateRead {
  std::vector<UpdateTensor> tensors;
  std::shared_ptr<Checkpoint> checkpoint;  // set when the tensors view it
};
Result<UpdateRead> read_update_dir(const std::string& dir, const ModelConfig& served, bool copy);

// The tensors of one safetensors file held in memory (a bucket), validated
// as the file reader validates files; `what` names it in messages.
// `metadata` (optional) receives its __metadata__.
Result<std::vector<UpdateTensor>> parse_safetensors_bytes(std::string_view bytes, const std::string& what,
                                                          std::map<std::string, std::string>* metadata = nullptr);

}  // namespace m2
