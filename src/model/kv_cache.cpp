#include "model/kv_cache.h"

namespace m2 {

KvCache::KvCache(const KvCacheShape& shape, std::shared_ptr<void> storage)
    : shape_(shape), storage_(std::move(storage)) {}

KvCache::KvCache(std::vector<std::unique_ptr<KvCache>> ranks)
    : shape_(ranks.at(0)->shape()), ranks_(std::move(ranks)) {}

}  // namespace m2
