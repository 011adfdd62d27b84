// Every kernel's GPU start and end time, for any CUDA program, without
// changing it: a CUDA injection library that turns on CUPTI's concurrent
// kernel activity records (graph replays and early-started kernels included)
// and writes them as CSV when the program exits.
//
//   CUDA_INJECTION64_PATH=build-gpu/libm2cpp_timeline.so M2CPP_TIMELINE_OUT=timeline.csv
//     build-gpu/m2cpp bench decode ...
//   python3 scripts/timeline_summary.py timeline.csv
//
// Why: at batch 1 the decode step is a chain of ~10 kernels per layer that
// start early (programmatic dependent launch) and overlap; Nsight Compute
// serialises them and times each alone, so it cannot show what one kernel
// costs the others (docs/perf.md, seventh pass), and Nsight Systems does not
// run on the lent machines (their KINDS.md). Columns: start_ns, end_ns (GPU
// clock), stream, graph_id, grid, block, cluster, registers, dynamic shared
// memory, the kernel's (mangled) name.
#include <cupti.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <vector>

namespace {

struct Record {
  uint64_t start, end;
  uint32_t stream, graph_id;
  int32_t grid[3], block[3];
  uint32_t cluster[3];
  uint16_t registers;
  int32_t dynamic_smem;
  std::string name;
};

std::mutex g_mutex;
std::vector<Record> g_records;
constexpr size_t kBufferBytes = 8u << 20;

void report(const char* what, CUptiResult r) {
  const char* msg = nullptr;
  cuptiGetResultString(r, &msg);
  std::fprintf(stderr, "m2cpp timeline: %s: %s\n", what, msg ? msg : "unknown CUPTI error");
}

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(8, kBufferBytes));
  *size = *buffer ? kBufferBytes : 0;
  *max_records = 0;
}

void CUPTIAPI buffer_completed(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid) {
  CUpti_Activity* r = nullptr;
  std::vector<Record> got;
  while (cuptiActivityGetNextRecord(buffer, valid, &r) == CUPTI_SUCCESS) {
    if (r->kind != CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL && r->kind != CUPTI_ACTIVITY_KIND_KERNEL) continue;
    const auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(r);
    got.push_back(Record{k->start,
                         k->end,
                         k->streamId,
                         k->graphId,
                         {k->gridX, k->gridY, k->gridZ},
                         {k->blockX, k->blockY, k->blockZ},
                         {k->clusterX, k->clusterY, k->clusterZ},
                         k->registersPerThread,
                         k->dynamicSharedMemory,
                         k->name ? k->name : "?"});
  }
  size_t dropped = 0;
  cuptiActivityGetNumDroppedRecords(nullptr, 0, &dropped);
  if (dropped) std::fprintf(stderr, "m2cpp timeline: %zu records dropped\n", dropped);
  std::free(buffer);
  std::lock_guard<std::mutex> lock(g_mutex);
  g_records.insert(g_records.end(), got.begin(), got.end());
}

void write_records() {
  const CUptiResult r = cuptiActivityFlushAll(1);
  if (r != CUPTI_SUCCESS) report("flushing the activity buffers", r);
  const char* path = std::getenv("M2CPP_TIMELINE_OUT");
  if (!path || !*path) path = "cuda_timeline.csv";
  std::lock_guard<std::mutex> lock(g_mutex);
  std::sort(g_records.begin(), g_records.end(), [](const Record& a, const Record& b) { return a.start < b.start; });
  FILE* f = std::fopen(path, "w");
  if (!f) {
    std::fprintf(stderr, "m2cpp timeline: cannot write %s\n", path);
    return;
  }
  std::fprintf(f, "start_ns,end_ns,stream,graph_id,grid,block,cluster,registers,dynamic_smem,name\n");
  for (const Record& k : g_records)
    std::fprintf(f, "%llu,%llu,%u,%u,%dx%dx%d,%dx%dx%d,%ux%ux%u,%u,%d,%s\n", static_cast<unsigned long long>(k.start),
                 static_cast<unsigned long long>(k.end), k.stream, k.graph_id, k.grid[0], k.grid[1], k.grid[2],
                 k.block[0], k.block[1], k.block[2], k.cluster[0], k.cluster[1], k.cluster[2], k.registers,
                 k.dynamic_smem, k.name.c_str());
  std::fclose(f);
  std::fprintf(stderr, "m2cpp timeline: %zu kernels -> %s\n", g_records.size(), path);
}

}  // namespace

// Called by the CUDA driver at cuInit when CUDA_INJECTION64_PATH names this
// library.
extern "C" int InitializeInjection(void) {
  CUptiResult r = cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed);
  if (r == CUPTI_SUCCESS) r = cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
  if (r != CUPTI_SUCCESS) {
    report("enabling kernel activity records", r);
    return 0;
  }
  std::atexit(write_records);
  return 1;
}
