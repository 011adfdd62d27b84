// Paged KV cache storage: per layer, K and V arrays of fixed-size blocks
// [num_blocks, block_size, kv_heads, head_dim], in backend memory. Which
// blocks a sequence owns is the caller's business (engine/ block manager);
// attention reads through per-sequence block tables. FP8 (e4m3) caches also
// hold one fp32 scale per token and kv head ([num_blocks, block_size,
// kv_heads] per layer, for K and for V): x ≈ fp8 × scale, scale = amax/448.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "tensor/dtype.h"

namespace m2 {

struct KvCacheShape {
  int num_layers = 0;
  int num_kv_heads = 0;
  int head_dim = 0;
  int block_size = 16;  // tokens per block
  int64_t num_blocks = 0;
  DType dtype = DType::kBF16;  // F32, BF16 or F8_E4M3

  int64_t token_elems() const { return static_cast<int64_t>(num_kv_heads) * head_dim; }  // per K (or V)
  int64_t block_bytes() const { return block_size * token_elems() * static_cast<int64_t>(dtype_size(dtype)); }
  bool scaled() const { return dtype == DType::kF8E4M3; }
  // Bytes of one layer's K (or V) scales.
  int64_t scale_bytes() const { return scaled() ? num_blocks * block_size * num_kv_heads * 4ll : 0; }
  // Bytes of K and V for one token across all layers (scales included).
  int64_t bytes_per_token() const {
    return 2ll * num_layers * (token_elems() * static_cast<int64_t>(dtype_size(dtype)) + (scaled() ? num_kv_heads * 4 : 0));
  }
};

class KvCache {
 public:
  KvCache(const KvCacheShape& shape, std::shared_ptr<void> storage);
  // The cache of a tensor-parallel model (model/tensor_parallel.h): one cache
  // per rank, each of its own kv heads, the blocks numbered alike in all;
  // `shape` is theirs (per rank). It holds no storage of its own: the ranks'
  // steps read and write rank(r).
  explicit KvCache(std::vector<std::unique_ptr<KvCache>> ranks);
  int num_ranks() const { return static_cast<int>(ranks_.size()); }  // 0: an ordinary cache
  KvCache& rank(int r) const { return *ranks_[r]; }

  const KvCacheShape& shape() const { return shape_; }
  // Base of layer `l`'s K (or V) blocks.
  void* k_base(int layer) const { return layer_base(layer, 0); }
  void* v_base(int layer) const { return layer_base(layer, 1); }
  // Per-(token, kv head) scales of FP8 caches (nullptr otherwise).
  float* k_scales(int layer) const { return scale_base(layer, 0); }
  float* v_scales(int layer) const { return scale_base(layer, 1); }
  static size_t storage_bytes(const KvCacheShape& shape) {
    return static_cast<size_t>(2ll * shape.num_layers * (shape.num_blocks * shape.block_bytes() + shape.scale_bytes()));
  }

 private:
  void* layer_base(int layer, int kv) const {
    return static_cast<uint8_t*>(storage_.get()) + (2ll * layer + kv) * shape_.num_blocks * shape_.block_bytes();
  }
  float* scale_base(int layer, int kv) const {
    if (!shape_.scaled()) return nullptr;
    uint8_t* scales = static_cast<uint8_t*>(storage_.get()) + 2ll * shape_.num_layers * shape_.num_blocks * shape_.block_bytes();
    return reinterpret_cast<float*>(scales + (2ll * layer + kv) * shape_.scale_bytes());
  }
  KvCacheShape shape_;
  std::shared_ptr<void> storage_;
  std::vector<std::unique_ptr<KvCache>> ranks_;
};

}  // namespace m2
