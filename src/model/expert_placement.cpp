#include "model/expert_placement.h"

#include <algorithm>
#include <charconv>

#include "model/weights.h"
#include <fmt/format.h>

namespace m2 {
namespace {

constexpr int64_t align256(int64_t n) { return (n + 255) / 256 * 256; }
double gib(int64_t bytes) { return bytes / 1073741824.0; }

bool is_expert(const std::string& name) { return name.find(".block_sparse_moe.experts.") != std::string::npos; }
int layer_of(const std::string& name) {
  int l = -1;
  if (name.rfind("model.layers.", 0) == 0) std::from_chars(name.data() + 13, name.data() + name.size(), l);
  return l;
}

}  // namespace

Result<ExpertPlacement> plan_expert_placement(const ModelConfig& config, const ExpertPlacementRequest& request) {
  ExpertPlacement p;
  p.num_layers = config.num_hidden_layers;
  // Each tensor as the CUDA backend lays it out: 256-byte aligned.
  for (const TensorSpec& s : expected_tensors(config)) {
    const int64_t bytes = align256(s.shape.numel() * static_cast<int64_t>(dtype_size(s.dtype)));
    if (!is_expert(s.name)) {
      p.other_bytes += bytes;
    } else if (layer_of(s.name) == 0) {
      p.expert_bytes_per_layer += bytes;
    }
  }
  using Mode = ExpertPlacementRequest::Mode;
  switch (request.mode) {
    case Mode::kNone: p.cpu_layers = 0; break;
    case Mode::kAll: p.cpu_layers = p.num_layers; break;
    case Mode::kCount:
      if (request.count < 0 || request.count > p.num_layers)
        return errorf("--n-cpu-moe {}: the model has {} layers", request.count, p.num_layers);
      p.cpu_layers = request.count;
      break;
    case Mode::kAuto: {
      const int64_t all = p.other_bytes + p.num_layers * p.expert_bytes_per_layer;
      if (all <= request.device_budget) break;  // everything fits: nothing on the host
      const int64_t staging = 2 * p.expert_bytes_per_layer;
      const int64_t room = request.device_budget - p.other_bytes - staging;
      if (room < 0)
        return errorf("--n-cpu-moe auto: the weights other than the routed experts ({:.2f} GiB) and two layers' "
                      "expert staging buffers ({:.2f} GiB) need {:.2f} GiB of the GPU, the budget leaves {:.2f} "
                      "GiB (raise --gpu-memory-utilization, lower --max-model-len or --max-num-seqs)",
                      gib(p.other_bytes), gib(staging), gib(p.other_bytes + staging), gib(request.device_budget));
      const int gpu_layers = static_cast<int>(std::min<int64_t>(room / p.expert_bytes_per_layer, p.num_layers));
      p.cpu_layers = p.num_layers - gpu_layers;
      break;
    }
  }
  if (p.cpu_layers > 0) p.staging_bytes = 2 * p.expert_bytes_per_layer;
  return p;
}

std::string ExpertPlacement::describe() const {
  if (cpu_layers == 0)
    return fmt::format("every layer's experts on the GPU: {:.2f} GiB on the GPU, 0 on the host", gib(device_bytes()));
  return fmt::format("experts of layers 0-{} on the host ({:.2f} GiB pinned), of the other {} layers on the GPU; "
                     "GPU {:.2f} GiB (non-expert weights {:.2f}, experts {:.2f}, staging {:.2f})",
                     cpu_layers - 1, gib(host_bytes()), num_layers - cpu_layers, gib(device_bytes()), gib(other_bytes),
                     gib((num_layers - cpu_layers) * expert_bytes_per_layer), gib(staging_bytes));
}

Result<ExpertPlacementRequest> parse_n_cpu_moe(const std::string& value) {
  ExpertPlacementRequest r;
  if (value == "auto") {
    r.mode = ExpertPlacementRequest::Mode::kAuto;
    return r;
  }
  int n = -1;
  const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), n);
  if (ec != std::errc() || end != value.data() + value.size() || n < 0)
    return errorf("--n-cpu-moe {}: expected auto or a number of layers >= 0", value);
  r.mode = n == 0 ? ExpertPlacementRequest::Mode::kNone : ExpertPlacementRequest::Mode::kCount;
  r.count = n;
  return r;
}

int host_expert_threads(int requested, int hardware_threads) {
  return requested > 0 ? requested : std::max(1, hardware_threads - 1);
}

}  // namespace m2
