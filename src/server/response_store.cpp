#include "server/response_store.h"

namespace m2::server {
namespace {

// What an entry costs: its JSON as text plus the bookkeeping around it, so
// that the cap bounds the process's memory and not only the payloads.
size_t entry_bytes(const std::string& id, const StoredResponse& r) {
  constexpr size_t kOverhead = 256;
  return id.size() + r.response.dump().size() + r.input_items.dump().size() + r.conversation.dump().size() + kOverhead;
}

}  // namespace

void ResponseStore::set_capacity(size_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  capacity_ = bytes;
  evict_locked();
}

bool ResponseStore::put(const std::string& id, StoredResponse entry) {
  const size_t cost = entry_bytes(id, entry);
  std::lock_guard<std::mutex> lock(mu_);
  if (auto it = index_.find(id); it != index_.end()) {
    bytes_ -= it->second->bytes;
    lru_.erase(it->second);
    index_.erase(it);
  }
  if (cost > capacity_) return false;
  lru_.push_front({id, std::make_shared<const StoredResponse>(std::move(entry)), cost});
  index_[id] = lru_.begin();
  bytes_ += cost;
  evict_locked();
  return true;
}

std::optional<StoredResponse> ResponseStore::get(const std::string& id) {
  std::shared_ptr<const StoredResponse> value;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = index_.find(id);
    if (it == index_.end()) return std::nullopt;
    lru_.splice(lru_.begin(), lru_, it->second);
    value = it->second->value;
  }
  return *value;  // copied outside the lock: a long conversation does not hold up other requests
}

bool ResponseStore::erase(const std::string& id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = index_.find(id);
  if (it == index_.end()) return false;
  bytes_ -= it->second->bytes;
  lru_.erase(it->second);
  index_.erase(it);
  return true;
}

size_t ResponseStore::bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return bytes_;
}

size_t ResponseStore::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return lru_.size();
}

void ResponseStore::evict_locked() {
  while (bytes_ > capacity_ && !lru_.empty()) {
    bytes_ -= lru_.back().bytes;
    index_.erase(lru_.back().id);
    lru_.pop_back();
  }
}

}  // namespace m2::server
