// The CUDA backend's side of host-resident experts (moe/host_experts.h):
// how many layers keep them on the host, and the MoE op of such a layer.
#include <fstream>
#include <string>

#include "backend/cuda/runtime/backend_impl.h"
#include "model/expert_placement.h"
#include "util/log.h"

namespace m2::cuda {

int64_t host_available_bytes() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  int64_t kib = 0;
  std::string unit;
  while (in >> key >> kib >> unit)
    if (key == "MemAvailable:") return kib * 1024;
  return 0;
}

Result<int> CudaBackend::host_expert_layers(const ModelWeights& w, size_t free_bytes, size_t total_bytes) const {
  const int layers = static_cast<int>(w.layers.size());
  if (options_.cpu_moe_layers == 0) return 0;
  if (options_.cpu_moe_layers == CudaOptions::kCpuMoeAll) return layers;
  if (options_.cpu_moe_layers > 0) {
    if (options_.cpu_moe_layers > layers)
      return errorf("--n-cpu-moe {}: the model has {} layers", options_.cpu_moe_layers, layers);
    return options_.cpu_moe_layers;
  }
  // auto: what this process may use of the device, less what is in use
  // already and the KV cache's and activations' reserve.
  ExpertPlacementRequest r;
  r.mode = ExpertPlacementRequest::Mode::kAuto;
  const int64_t used = static_cast<int64_t>(total_bytes - free_bytes);
  r.device_budget = static_cast<int64_t>(options_.cpu_moe_memory_fraction * static_cast<double>(total_bytes)) - used -
                    options_.cpu_moe_reserve_bytes;
  ModelConfig c = w.config;
  c.num_hidden_layers = layers;
  M2_ASSIGN_OR_RETURN(const ExpertPlacement p, plan_expert_placement(c, r));
  log_info("--n-cpu-moe auto: {:.2f} GiB of GPU {} for weights ({:.2f} of {:.2f} GiB, {:.2f} in use, {:.2f} kept for "
           "the KV cache and activations): {}",
           r.device_budget / 1073741824.0, device_, options_.cpu_moe_memory_fraction * total_bytes / 1073741824.0,
           total_bytes / 1073741824.0, used / 1073741824.0, options_.cpu_moe_reserve_bytes / 1073741824.0, p.describe());
  return p.cpu_layers;
}

void CudaBackend::moe_host(Act x, const PreparedExperts& layer, const Routing& routing, Act out, const ActCopy& xc) {
  const HostExperts& h = *layer.host;
  if (x.rows <= host_experts_->max_cpu_rows()) {
    bind_device();
    auto timer = timed([&] { return fmt::format("moe (CPU) T={}", x.rows); });
    host_experts_->moe_on_cpu(h, x, routing, out, stream_);
    return;
  }
  // (The next host layer's copy starts too.)
  const DeviceExperts& staged = host_experts_->staged(h, stream_);
  moe_on(x, staged, routing, out, xc);
  host_experts_->released(h, stream_);
}

}  // namespace m2::cuda
