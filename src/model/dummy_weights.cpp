// --load-format dummy: deterministic random weights in the real dtypes and
// shapes, without files, so the full-size model can be loaded, sized and
// benchmarked. Values are scaled like a trained model's (unit-RMS
// activations), so the kernels see realistic magnitudes.
#include <cmath>
#include <cstring>
#include <map>

#include "model/dummy_values.h"
#include "model/weights.h"
#include "util/log.h"
#include "util/mapped_file.h"
#include "util/thread_pool.h"

namespace m2 {

Status bind_dummy_weights(ModelWeights& w, const std::map<std::string, TensorView>& views);

namespace {

uint64_t splitmix64(uint64_t& s) { return splitmix64_mix(s += kSplitmixGolden); }

uint64_t hash_name(const std::string& s) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a
  for (unsigned char ch : s) h = (h ^ ch) * 1099511628211ull;
  return h;
}

// Uniform in [-1, 1) from 24 random bits.
float unit(uint64_t bits) { return static_cast<float>(bits & 0xffffff) * (2.0f / 16777216.0f) - 1.0f; }

// Fills `n` elements of `dtype` at `dst` with uniform values in [-a, a) (FP8:
// codes of uniform values in [-64, 64)), in parallel chunks seeded by index
// so the result does not depend on the thread count.
// (model/dummy_values.h computes the FP8 elements one by one the same way.)
void fill_uniform(void* dst, int64_t n, DType dtype, float a, uint64_t seed) {
  static const DummyFp8Table fp8_lut = dummy_fp8_table();
  const int64_t chunks = (n + kDummyChunk - 1) / kDummyChunk;
  ThreadPool::global().parallel_for(chunks, [&](int64_t c, int) {
    uint64_t s = seed ^ (kDummyChunkMix * static_cast<uint64_t>(c + 1));
    const int64_t b = c * kDummyChunk, e = std::min(n, b + kDummyChunk);
    switch (dtype) {
      case DType::kF8E4M3: {
        uint8_t* p = static_cast<uint8_t*>(dst);
        for (int64_t i = b; i < e; i += 8) {
          uint64_t r = splitmix64(s);
          for (int64_t j = i; j < std::min(e, i + 8); ++j, r >>= 8) p[j] = fp8_lut.code[r & 0xff];
        }
        break;
      }
      case DType::kBF16: {
        uint16_t* p = static_cast<uint16_t*>(dst);
        for (int64_t i = b; i < e; ++i) p[i] = f32_to_bf16(a * unit(splitmix64(s)));
        break;
      }
      case DType::kF16: {
        uint16_t* p = static_cast<uint16_t*>(dst);
        for (int64_t i = b; i < e; ++i) p[i] = f32_to_f16(a * unit(splitmix64(s)));
        break;
      }
      default: {
        float* p = static_cast<float*>(dst);
        for (int64_t i = b; i < e; ++i) p[i] = a * unit(splitmix64(s));
        break;
      }
    }
  });
}

}  // namespace

DummyFp8Table dummy_fp8_table() {
  DummyFp8Table t{};
  for (int i = 0; i < 256; ++i) t.code[i] = f32_to_f8e4m3((i + 0.5f) / 256.0f * 128.0f - 64.0f);
  return t;
}

Result<std::unique_ptr<ModelWeights>> make_dummy_weights(const ModelConfig& config, uint64_t seed,
                                                         bool fp8_on_device) {
  auto w = std::make_unique<ModelWeights>();
  w->config = config;
  const std::vector<TensorSpec> specs = expected_tensors(config);
  uint64_t total = 0;
  for (const TensorSpec& s : specs) total += static_cast<uint64_t>(s.shape.numel()) * dtype_size(s.dtype);
  log_info("dummy weights: {} tensors, {:.2f} GiB", specs.size(), total / double(1ull << 30));

  const float sqrt3 = std::sqrt(3.0f);  // uniform [-a, a) has std a / sqrt(3)
  std::map<std::string, TensorView> views;
  for (size_t i = 0; i < specs.size(); ++i) {
    const TensorSpec& s = specs[i];
    const size_t bytes = static_cast<size_t>(s.shape.numel()) * dtype_size(s.dtype);
    const uint64_t tseed = hash_name(s.name) ^ (seed * 0x9e3779b97f4a7c15ull);
    const int64_t n = s.shape.numel();
    if (fp8_on_device && s.kind == TensorSpec::Kind::kLinear && s.dtype == DType::kF8E4M3) {
      M2_ASSIGN_OR_RETURN(std::shared_ptr<void> place, reserve_inaccessible(bytes));
      w->dummy_fp8[place.get()] = ModelWeights::DummyFp8{tseed, n};
      views[s.name] = TensorView{s.dtype, s.shape, place.get()};
      w->placeholders.push_back(std::move(place));
      continue;
    }
    std::unique_ptr<uint8_t[]> buf(new (std::nothrow) uint8_t[std::max<size_t>(bytes, 1)]);
    if (!buf) return errorf("dummy weights: cannot allocate {} bytes for '{}'", bytes, s.name);
    switch (s.kind) {
      case TensorSpec::Kind::kEmbedding: fill_uniform(buf.get(), n, s.dtype, sqrt3, tseed); break;
      case TensorSpec::Kind::kNorm: {
        fill_uniform(buf.get(), n, s.dtype, 0.2f, tseed);
        // Norm weights around 1: add 1 to each element.
        for (int64_t j = 0; j < n; ++j) {
          if (s.dtype == DType::kBF16) {
            auto* p = reinterpret_cast<uint16_t*>(buf.get());
            p[j] = f32_to_bf16(1.0f + bf16_to_f32(p[j]));
          } else if (s.dtype == DType::kF16) {
            auto* p = reinterpret_cast<uint16_t*>(buf.get());
            p[j] = f32_to_f16(1.0f + f16_to_f32(p[j]));
          } else {
            reinterpret_cast<float*>(buf.get())[j] += 1.0f;
          }
        }
        break;
      }
      case TensorSpec::Kind::kLinear:
      case TensorSpec::Kind::kRouter:
        fill_uniform(buf.get(), n, s.dtype, sqrt3 / std::sqrt(static_cast<float>(s.shape[1])), tseed);
        break;
      case TensorSpec::Kind::kRouterBias: fill_uniform(buf.get(), n, s.dtype, 0.05f, tseed); break;
      case TensorSpec::Kind::kScale: {
        // The weight before this spec holds FP8 codes of U[-64, 64) (std 36.95);
        // scales bring the effective weight std to 1/sqrt(in) with +-25% spread.
        const float in = static_cast<float>(specs[i - 1].shape[1]);
        float* p = reinterpret_cast<float*>(buf.get());
        fill_uniform(p, n, DType::kF32, 0.25f, tseed);
        for (int64_t j = 0; j < n; ++j) p[j] = (1.0f + p[j]) / (36.95f * std::sqrt(in));
        break;
      }
    }
    TensorView v;
    v.dtype = s.dtype;
    v.shape = s.shape;
    v.data = buf.get();
    views[s.name] = v;
    w->owned.push_back(std::move(buf));
  }
  M2_RETURN_IF_ERROR(bind_dummy_weights(*w, views));
  return w;
}

}  // namespace m2
