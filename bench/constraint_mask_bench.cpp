// Constrained decoding's cost per token at M2's vocabulary (200,064 rows;
// the ../shared/data/tokenizers/m2-layout stand-in: GPT-4o's 200K byte-level
// vocabulary with M2's added tokens at their ids): the mask of the next
// token (ConstraintMatcher::fill_mask) plus advancing the grammar by the
// token (accept), walked along a real output of each grammar kind (the tool
// call's grammar has the form server/structured_output.cpp builds), and the
// sampler's masking of a 200K logit row. Printed as us_per_token.
//   build/constraint_mask_bench [--benchmark_filter=...]
#include <benchmark/benchmark.h>

#include <chrono>
#include <random>

#include "engine/constraint.h"
#include "model/sampling.h"
#include "text/tokenizer/tokenizer.h"

namespace m2 {
namespace {

constexpr int kVocab = 200064;

struct Fixture {
  std::unique_ptr<text::Tokenizer> tokenizer;
  std::unique_ptr<ConstraintCompiler> compiler;
};

const Fixture* fixture() {
  static const Fixture* f = [] {
    auto* out = new Fixture;
    auto tok = text::Tokenizer::load_from_dir(std::string(M2CPP_SOURCE_DIR) + "/../shared/data/tokenizers/m2-layout");
    if (!tok.ok()) return out;
    out->tokenizer = std::move(*tok);
    auto c = ConstraintCompiler::create(*out->tokenizer, kVocab, {200020});
    if (c.ok()) out->compiler = std::move(*c);
    return out;
  }();
  return f;
}

const char* kSchema = R"({"type":"object","properties":{
  "city":{"type":"string"},"days":{"type":"integer","minimum":1,"maximum":14},
  "units":{"enum":["metric","imperial"]},"stops":{"type":"array","items":{"type":"object",
  "properties":{"name":{"type":"string"},"lat":{"type":"number"},"lon":{"type":"number"}},
  "required":["name","lat","lon"]}}},"required":["city","days","units","stops"]})";
const char* kDoc =
    R"({"city": "Lisbon", "days": 4, "units": "metric", "stops": [{"name": "Belém Tower", "lat": 38.6916, "lon": -9.2160}, {"name": "Alfama", "lat": 38.7139, "lon": -9.1300}]})";

const char* kToolTag = R"({"type":"structural_tag","format":{"type":"sequence","elements":[
  {"type":"const_string","value":"\n\n<minimax:tool_call>\n"},
  {"type":"tag","begin":"<invoke name=\"get_weather\">\n","content":{"type":"sequence","elements":[
    {"type":"tag","begin":"<parameter name=\"city\">","content":{"type":"any_text","excludes":["</parameter>"]},
     "end":"</parameter>\n"},
    {"type":"tag","begin":"<parameter name=\"days\">","content":{"type":"json_schema","json_schema":{"type":"integer"}},
     "end":"</parameter>\n"},
    {"type":"optional","content":{"type":"tag","begin":"<parameter name=\"units\">","content":{"type":"or",
     "elements":[{"type":"const_string","value":"metric"},{"type":"const_string","value":"imperial"}]},
     "end":"</parameter>\n"}}]},
   "end":"</invoke>\n"},
  {"type":"const_string","value":"</minimax:tool_call>"}]}})";
const char* kToolCall =
    "\n\n<minimax:tool_call>\n<invoke name=\"get_weather\">\n<parameter name=\"city\">Lisbon, Portugal</parameter>\n"
    "<parameter name=\"days\">4</parameter>\n<parameter name=\"units\">metric</parameter>\n</invoke>\n"
    "</minimax:tool_call>";

void walk(benchmark::State& state, ConstraintSource::Kind kind, const char* source, const char* text) {
  const Fixture* f = fixture();
  if (!f->compiler) return state.SkipWithError("../shared/data/tokenizers/m2-layout is not here");
  auto c = f->compiler->compile({kind, source});
  if (!c.ok()) return state.SkipWithError(c.status().message().c_str());
  auto ids = f->tokenizer->encode(text);
  if (!ids.ok()) return state.SkipWithError("encode failed");
  std::vector<uint32_t> mask(static_cast<size_t>(constraint_mask_words(kVocab)));
  int64_t tokens = 0;
  for (auto _ : state) {
    ConstraintMatcher m(*c);
    for (int32_t id : *ids) {
      m.fill_mask(mask);
      benchmark::DoNotOptimize(mask.data());
      if (!m.accept(id)) return state.SkipWithError("the walk left its grammar");
    }
    tokens += static_cast<int64_t>(ids->size());
  }
  state.counters["tokens"] = static_cast<double>(ids->size());
  state.counters["us_per_token"] =
      benchmark::Counter(static_cast<double>(tokens) * 1e-6, benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}

void BM_MaskJsonSchema(benchmark::State& s) { walk(s, ConstraintSource::Kind::kJsonSchema, kSchema, kDoc); }
void BM_MaskToolCallXml(benchmark::State& s) { walk(s, ConstraintSource::Kind::kStructuralTag, kToolTag, kToolCall); }
void BM_MaskRegex(benchmark::State& s) {
  walk(s, ConstraintSource::Kind::kRegex, R"([A-Z][a-z]+ [0-9]{4}-[0-9]{2}-[0-9]{2}( \(tentative\))?)",
       "Lisbon 2026-12-01 (tentative)");
}
void BM_MaskJsonObject(benchmark::State& s) {
  walk(s, ConstraintSource::Kind::kJsonSchema, R"({"type":"object"})", kDoc);
}

// Compiling a schema for the 200K vocabulary (on a request thread, before the
// request reaches the engine; the compiler caches it by source).
void BM_CompileJsonSchema(benchmark::State& state) {
  const Fixture* f = fixture();
  if (!f->compiler) return state.SkipWithError("../shared/data/tokenizers/m2-layout is not here");
  int i = 0;
  for (auto _ : state) {
    // A distinct source each time, so the cache does not answer.
    const std::string schema = std::string(kSchema).insert(1, "\"title\":\"t" + std::to_string(i++) + "\",");
    benchmark::DoNotOptimize(f->compiler->compile({ConstraintSource::Kind::kJsonSchema, schema}));
  }
}

// The sampler's part: a 200K logit row, greedy, with and without a mask
// that allows 1 token in 64.
void BM_SampleRow(benchmark::State& state) {
  const bool masked = state.range(0) != 0;
  std::mt19937 rng(3);
  std::vector<float> base(kVocab);
  for (float& x : base) x = std::normal_distribution<float>(0, 3)(rng);
  std::vector<uint32_t> mask(static_cast<size_t>(constraint_mask_words(kVocab)), 0);
  for (int id = 0; id < kVocab; id += 64) mask[id / 32] |= 1u << (id % 32);
  SampleRow row;
  row.temperature = 0;
  if (masked) row.allowed = mask;
  std::vector<float> lg(kVocab);
  for (auto _ : state) {
    lg = base;
    benchmark::DoNotOptimize(sample_row(lg, row));
  }
  state.counters["us_per_token"] =
      benchmark::Counter(static_cast<double>(state.iterations()) * 1e-6,
                         benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}

BENCHMARK(BM_MaskJsonSchema)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_MaskJsonObject)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_MaskToolCallXml)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_MaskRegex)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_CompileJsonSchema)->Unit(benchmark::kMillisecond)->Iterations(3);
BENCHMARK(BM_SampleRow)->Arg(0)->Arg(1)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace m2

BENCHMARK_MAIN();
