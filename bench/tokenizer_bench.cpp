// Tokenizer speed: load time and single-threaded encode throughput.
//
//   tokenizer_bench --tokenizer DIR --corpus DOCS.jsonl [google-benchmark flags]
//
// DOCS.jsonl holds one JSON string per line (tools/tokenizer_corpus.py
// writes one). Encode throughput is reported as bytes_per_second over the
// whole corpus, documents encoded one after another on one thread, as HF's
// `Tokenizer.encode` is called by tools/tokenizer_bench.py, which runs this
// program and prints both figures side by side.
#include <benchmark/benchmark.h>

#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "text/tokenizer/tokenizer.h"
#include "util/json.h"

namespace {

std::string g_tokenizer_dir;
std::vector<std::string> g_docs;
size_t g_bytes = 0;

void BM_Load(benchmark::State& state) {
  for (auto _ : state) {
    auto tok = m2::text::Tokenizer::load_from_dir(g_tokenizer_dir);
    if (!tok.ok()) {
      state.SkipWithError(tok.status().message().c_str());
      return;
    }
    benchmark::DoNotOptimize(tok.value().get());
  }
}

void BM_Encode(benchmark::State& state) {
  auto tok = m2::text::Tokenizer::load_from_dir(g_tokenizer_dir);
  if (!tok.ok()) {
    state.SkipWithError(tok.status().message().c_str());
    return;
  }
  size_t tokens = 0;
  for (auto _ : state) {
    for (const auto& doc : g_docs) {
      auto ids = tok.value()->encode(doc);
      if (!ids.ok()) {
        state.SkipWithError(ids.status().message().c_str());
        return;
      }
      tokens += ids.value().size();
    }
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * g_bytes));
  state.counters["tokens_per_s"] = benchmark::Counter(static_cast<double>(tokens), benchmark::Counter::kIsRate);
}

BENCHMARK(BM_Load)->Unit(benchmark::kMillisecond)->MinTime(1.0);
BENCHMARK(BM_Encode)->Unit(benchmark::kMillisecond)->MinTime(2.0);

bool load_corpus(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  std::string line;
  for (size_t n = 1; std::getline(in, line); ++n) {
    auto j = m2::parse_json(line, path);
    if (!j.ok() || !j.value().is_string()) {
      std::fprintf(stderr, "%s:%zu: expected a JSON string\n", path.c_str(), n);
      return false;
    }
    g_docs.push_back(j.value().get<std::string>());
    g_bytes += g_docs.back().size();
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  std::string corpus;
  for (int i = 1; i + 1 < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--tokenizer")
      g_tokenizer_dir = argv[++i];
    else if (arg == "--corpus")
      corpus = argv[++i];
  }
  if (g_tokenizer_dir.empty() || corpus.empty() || !load_corpus(corpus)) {
    std::fprintf(stderr, "usage: tokenizer_bench --tokenizer DIR --corpus DOCS.jsonl [benchmark flags]\n");
    return 2;
  }
  std::fprintf(stderr, "corpus: %zu documents, %.2f MB\n", g_docs.size(), static_cast<double>(g_bytes) / 1e6);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
