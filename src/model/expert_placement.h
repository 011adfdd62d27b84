// Where each layer's routed experts live when one GPU cannot hold them all
// (issue 22): the experts of the first `cpu_layers` layers stay in host
// memory (the CPU computes small steps, larger ones stream them to the GPU
// a layer at a time into one of two staging buffers); everything else
// (embeddings, attention, norms, router, lm_head, the other layers' experts)
// lives on the GPU. llama.cpp's names: --cpu-moe (all), --n-cpu-moe N (the
// first N), and --n-cpu-moe auto (as many layers' experts on the GPU as a
// device budget leaves room for). Pure arithmetic over the config, so `info`
// and the tests need no GPU.
#pragma once

#include <cstdint>
#include <string>

#include "io/model_config.h"
#include "util/status.h"

namespace m2 {

struct ExpertPlacementRequest {
  enum class Mode { kNone, kAll, kCount, kAuto } mode = Mode::kNone;
  int count = 0;               // kCount: layers whose experts stay on the host
  int64_t device_budget = 0;   // kAuto: device bytes the weights (and the staging buffers) may take
};

struct ExpertPlacement {
  int num_layers = 0;
  int cpu_layers = 0;                 // layers [0, cpu_layers) keep their experts on the host
  int64_t expert_bytes_per_layer = 0;  // one layer's routed experts as stored (device layout, 256-byte aligned)
  int64_t other_bytes = 0;             // everything that is not a routed expert (always on the device)
  int64_t staging_bytes = 0;           // two layers' experts on the device, when cpu_layers > 0
  int64_t device_bytes() const { return other_bytes + (num_layers - cpu_layers) * expert_bytes_per_layer + staging_bytes; }
  int64_t host_bytes() const { return cpu_layers * expert_bytes_per_layer; }
  // "experts of layers 0-9 on the host (36.2 GiB), 52 layers' on the GPU ...".
  std::string describe() const;
};

// The placement for `config` (its num_hidden_layers, i.e. after --num-layers).
// kAuto fails, naming the GiB, when even every expert on the host leaves the
// rest of the weights and the staging buffers over the budget; kCount fails
// for a count above the layers.
Result<ExpertPlacement> plan_expert_placement(const ModelConfig& config, const ExpertPlacementRequest& request);

// "--n-cpu-moe" values: "auto" or a count >= 0.
Result<ExpertPlacementRequest> parse_n_cpu_moe(const std::string& value);

// The CPU threads that compute host-resident experts: `requested` (--threads)
// when positive, else every hardware thread but one, which stays for the
// thread that queues the GPU's work and waits on it (on the H200 host a 16th
// expert thread on 16 cores more than halved their speed: docs/perf.md).
int host_expert_threads(int requested, int hardware_threads);

}  // namespace m2
