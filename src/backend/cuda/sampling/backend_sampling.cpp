// The CUDA backend's sampling op (kernel: sampling.cu) and memory figures.
// Per step it uploads the rows' parameters and edits (a few KB), launches one
// cluster per row and copies back only the results (id, logprob, top n).
// Without sm_90 code (no clusters) the logits come to the host instead and
// model/sampling.h's reference samples them: the same tokens, slower.
#include <cstring>

#include "backend/cuda/runtime/backend_impl.h"
#include "backend/cuda/sampling/sampling.h"
#include "util/thread_pool.h"

namespace m2::cuda {

Status CudaBackend::sample(Act logits, std::span<const SampleRow> rows, std::span<SampledToken> out) {
  M2_RETURN_IF_ERROR(check_sample_args(logits, rows, out));
  if (rows.empty()) return Status();
  if (!features_.gpu_sampling) return sample_on_host(logits, rows, out);
  if (logits.cols > sample_max_vocab())
    return errorf("sample: vocabulary {} above the CUDA sampler's {}", logits.cols, sample_max_vocab());
  bind_device();
  auto timer = timed([&] { return fmt::format("sample R={}", rows.size()); });
  std::vector<SampleRowArgs> args(rows.size());
  std::vector<LogitEdit> edits;
  std::vector<uint32_t> masks;  // the rows' token masks, one after another
  const size_t mask_words = static_cast<size_t>((logits.cols + 31) / 32);
  for (size_t r = 0; r < rows.size(); ++r) {
    const SampleRow& x = rows[r];
    SampleRowArgs& a = args[r];
    a.inv_temperature = x.greedy() ? 0.0 : 1.0 / static_cast<double>(x.temperature);
    a.seed = x.seed, a.step = x.step;
    a.top_p = x.top_p, a.min_p = x.min_p, a.repetition_penalty = x.repetition_penalty;
    a.top_k = x.top_k, a.logprobs = x.logprobs, a.forced = x.forced;
    const std::vector<LogitEdit> e = logit_edits(x);
    a.first_edit = static_cast<int32_t>(edits.size());
    a.num_edits = static_cast<int32_t>(e.size());
    edits.insert(edits.end(), e.begin(), e.end());
    if (!x.allowed.empty()) {  // (check_sample_args: at least mask_words words)
      a.mask = static_cast<int64_t>(masks.size());
      masks.insert(masks.end(), x.allowed.begin(), x.allowed.begin() + static_cast<std::ptrdiff_t>(mask_words));
    }
  }
  const auto* d_args = static_cast<const SampleRowArgs*>(sample_args_.upload(args, stream_));
  const auto* d_edits = edits.empty() ? nullptr : static_cast<const LogitEdit*>(sample_edits_.upload(edits, stream_));
  const auto* d_masks = masks.empty() ? nullptr : static_cast<const uint32_t*>(sample_masks_.upload(masks, stream_));
  auto* d_results = static_cast<SampleRowResult*>(sample_results_.reserve(rows.size() * sizeof(SampleRowResult), stream_));
  check(launch_sample(logits.data, logits.rows, logits.cols, d_args, d_edits, d_masks, d_results, stream_), "sample", [&] {
    return fmt::format("sample of logits [{}, {}] ({} edits, {} masked rows)", logits.rows, logits.cols, edits.size(),
                       masks.size() / std::max<size_t>(mask_words, 1));
  });
  sample_results_host_.resize(rows.size());
  copy_to_host(d_results, sample_results_host_.data(), rows.size() * sizeof(SampleRowResult));
  for (size_t r = 0; r < rows.size(); ++r) {
    const SampleRowResult& res = sample_results_host_[r];
    SampledToken& t = out[r];
    t.id = res.id;
    t.logprob = res.logprob;
    t.top.clear();
    for (int j = 0; j < res.num_top; ++j) t.top.push_back({res.top_ids[j], res.top_logprobs[j]});
  }
  return Status();
}

Status CudaBackend::sample_on_host(Act logits, std::span<const SampleRow> rows, std::span<SampledToken> out) {
  const int64_t V = logits.cols;
  sample_logits_host_.resize(rows.size() * static_cast<size_t>(V));
  copy_to_host(logits.data, sample_logits_host_.data(), sample_logits_host_.size() * sizeof(float));
  // Each row's result depends on its own inputs only: any thread count gives the same tokens.
  ThreadPool::global().parallel_for(static_cast<int64_t>(rows.size()), [&](int64_t r, int) {
    out[r] = sample_row(std::span<float>(sample_logits_host_.data() + r * V, static_cast<size_t>(V)), rows[r]);
  });
  return Status();
}

MemoryInfo CudaBackend::memory_info() {
  bind_device();
  MemoryInfo m;
  M2_CUDA_CHECK(cudaMemGetInfo(&m.free_bytes, &m.total_bytes), "memory info of device {}", device_);
  return m;
}

}  // namespace m2::cuda
