#include "model/kv_cache.h"

namespace m2 {

KvCache::KvCache(const KvCacheShape& shape, std::shared_ptr<void> storage)
    : shape_(shape), storage_(std::move(storage)) {}

}  // namespace m2
