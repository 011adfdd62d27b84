// `m2cpp bench allreduce -tp N --device cuda[:K]`: the all-reduce between N
// GPU ranks (GPUs K.. or M2CPP_TP_DEVICES) at message sizes from --min-bytes
// to --max-bytes (doubling), as nccl-tests prints it: time per call and bus
// bandwidth (bytes x 2 (N-1) / N per second, the link traffic of a ring),
// for the peer-to-peer one-shot kernel (eager and replayed from a graph, as a
// decode step runs it) and for the host-staged fallback. One decode token's
// all-reduce is 3072 fp32 = 12 KB at the M2 shape; a second table times it
// as a layer runs it, fused with the residual add and RMSNorm that follow
// (all_reduce_add_rms_norm) beside the two kernels it replaces, at 1 to 32
// decode rows.
#include "cli/bench_allreduce.h"

#include <fmt/format.h>

#include <fstream>
#include <memory>

#include "cli/model_options.h"
#include "util/json.h"
#ifdef M2CPP_WITH_CUDA
#include "backend/cuda/cuda_backend.h"
#endif

namespace m2::cli {
namespace {

struct Args {
  int tp = 2;
  std::string device = "cuda";
  int64_t min_bytes = 8 << 10;
  int64_t max_bytes = 64 << 20;
  int iters = 20;
  bool skip_staged = false;
  std::string json_out;
};

int run(const Args& a) {
  auto fail = [](const Status& s) { return fmt::print(stderr, "error: {}\n", s.message()), 1; };
#ifdef M2CPP_WITH_CUDA
  ModelOptions mo;  // (its rank placement: --device and M2CPP_TP_DEVICES)
  mo.device = a.device, mo.tensor_parallel_size = a.tp;
  if (parse_cuda_device(a.device) < 0) return fail(errorf("--device {}: bench allreduce times GPUs (cuda[:N])", a.device));
  auto devices = mo.tensor_parallel_devices();
  if (!devices.ok()) return fail(devices.status());
  if (a.min_bytes < 4 || a.max_bytes < a.min_bytes)
    return fail(errorf("--min-bytes {} --max-bytes {}: need 4 <= min <= max", a.min_bytes, a.max_bytes));
  std::vector<int64_t> sizes;
  for (int64_t b = a.min_bytes; b <= a.max_bytes; b *= 2) sizes.push_back(b / 4 * 4);
  auto peer = cuda_time_all_reduce(*devices, CollectiveKind::kPeer, sizes, a.iters);
  if (!peer.ok()) return fail(peer.status());
  std::vector<CollectiveTiming> staged(sizes.size());
  if (!a.skip_staged) {
    auto s = cuda_time_all_reduce(*devices, CollectiveKind::kStaged, sizes, std::max(2, a.iters / 4));
    if (!s.ok()) return fail(s.status());
    staged = *s;
  }
  const double factor = 2.0 * (a.tp - 1) / a.tp;
  auto bus = [&](int64_t bytes, double us) { return us > 0 ? bytes * factor / (us * 1e-6) / 1e9 : 0.0; };
  fmt::print("all-reduce, {} ranks on GPU(s) {}; {} calls per size; bus GB/s = bytes x {:.3f} / time\n", a.tp,
             fmt::join(*devices, ","), a.iters, factor);
  fmt::print("{:>10}  {:>12} {:>9}  {:>12} {:>9}  {:>12} {:>9}\n", "bytes", "peer us", "bus GB/s", "peer graph", "bus GB/s",
             "staged us", "bus GB/s");
  nlohmann::json rows = nlohmann::json::array();
  for (size_t i = 0; i < sizes.size(); ++i) {
    const CollectiveTiming& p = (*peer)[i];
    const CollectiveTiming& s = staged[i];
    fmt::print("{:>10}  {:>12.2f} {:>9.2f}  {:>12.2f} {:>9.2f}  {:>12.2f} {:>9.2f}\n", sizes[i], p.eager_us,
               bus(sizes[i], p.eager_us), p.graph_us, bus(sizes[i], p.graph_us), s.eager_us, bus(sizes[i], s.eager_us));
    rows.push_back({{"bytes", sizes[i]},
                    {"peer_us", p.eager_us},
                    {"peer_graph_us", p.graph_us},
                    {"staged_us", s.eager_us},
                    {"peer_bus_gbps", bus(sizes[i], p.eager_us)},
                    {"peer_graph_bus_gbps", bus(sizes[i], p.graph_us)}});
  }
  // The layer's all-reduce + add + RMSNorm at decode rows.
  std::vector<int64_t> norm_sizes;
  for (int64_t t = 1; t <= 32; t *= 2) norm_sizes.push_back(t * kCollectiveNormCols * 4);
  auto fused = cuda_time_all_reduce(*devices, CollectiveKind::kPeerAddRmsNorm, norm_sizes, a.iters);
  if (!fused.ok()) return fail(fused.status());
  auto unfused = cuda_time_all_reduce(*devices, CollectiveKind::kPeerThenAddRmsNorm, norm_sizes, a.iters);
  if (!unfused.ok()) return fail(unfused.status());
  fmt::print("\nall-reduce + residual add + RMSNorm of rows of {} fp32 (a layer's, at decode), us per call\n",
             kCollectiveNormCols);
  fmt::print("{:>6}  {:>12} {:>12}  {:>12} {:>12}\n", "rows", "fused", "fused graph", "two kernels", "two graph");
  nlohmann::json norm_rows = nlohmann::json::array();
  for (size_t i = 0; i < norm_sizes.size(); ++i) {
    const int64_t t = norm_sizes[i] / (kCollectiveNormCols * 4);
    const CollectiveTiming &f = (*fused)[i], &u = (*unfused)[i];
    fmt::print("{:>6}  {:>12.2f} {:>12.2f}  {:>12.2f} {:>12.2f}\n", t, f.eager_us, f.graph_us, u.eager_us, u.graph_us);
    norm_rows.push_back({{"rows", t},
                         {"fused_us", f.eager_us},
                         {"fused_graph_us", f.graph_us},
                         {"unfused_us", u.eager_us},
                         {"unfused_graph_us", u.graph_us}});
  }
  if (!a.json_out.empty()) {
    std::ofstream f(a.json_out);
    f << nlohmann::json{{"ranks", a.tp}, {"devices", *devices}, {"iters", a.iters}, {"sizes", rows},
                        {"add_rms_norm", norm_rows}}
             .dump(2)
      << "\n";
    if (!f) return fail(errorf("--json {}: cannot write", a.json_out));
  }
  return 0;
#else
  (void)a;
  return fail(errorf("bench allreduce: this build has no CUDA backend"));
#endif
}

}  // namespace

std::function<int()> add_bench_allreduce(CLI::App* bench, CLI::App** sub) {
  auto* app = bench->add_subcommand("allreduce", "All-reduce latency and bus bandwidth between GPU ranks (8 KB - 64 MB)");
  auto a = std::make_shared<Args>();
  app->add_option("--tensor-parallel-size", a->tp, "(also -tp) Ranks, one per GPU")->check(CLI::Range(2, 8));
  app->add_option("--device", a->device, "cuda[:K]: ranks on GPUs K, K+1, ... (M2CPP_TP_DEVICES lists them)");
  app->add_option("--min-bytes", a->min_bytes, "Smallest message");
  app->add_option("--max-bytes", a->max_bytes, "Largest message (sizes double from the smallest)");
  app->add_option("--iters", a->iters, "Calls timed per size")->check(CLI::Range(1, 100000));
  app->add_flag("--skip-staged", a->skip_staged, "Time the peer-to-peer collectives only");
  app->add_option("--json", a->json_out, "Also write the figures to this JSON file");
  *sub = app;
  return [a] { return run(*a); };
}

}  // namespace m2::cli
