// The stored responses of /v1/responses (`store`, default true as OpenAI):
// each finished response's JSON, its input items, and the conversation it
// ends (chat messages: the earlier turns, its input, its output), so that a
// request naming it as `previous_response_id` continues that conversation
// without the client sending it again, and GET/DELETE /v1/responses/{id}
// find it. Memory is bounded by `--responses-store-bytes`: entries are
// charged their serialized size and the least recently used are dropped
// once the total passes the cap (an entry larger than the cap is not
// stored; a cap of 0 stores nothing). In memory only: a restart forgets.
#pragma once

#include <cstddef>
#include <list>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>

#include "util/json.h"

namespace m2::server {

struct StoredResponse {
  OrderedJson response;      // as GET /v1/responses/{id} returns it
  OrderedJson input_items;   // the request's input as items (GET .../input_items)
  OrderedJson conversation;  // chat messages up to and including this response's output
};

// Thread-safe.
class ResponseStore {
 public:
  explicit ResponseStore(size_t capacity_bytes = 64u << 20) : capacity_(capacity_bytes) {}
  void set_capacity(size_t bytes);

  // Replaces an entry of the same id. False when it was not kept (larger than the cap).
  bool put(const std::string& id, StoredResponse entry);
  // A copy (the entry may be evicted while the caller reads it); refreshes its recency.
  std::optional<StoredResponse> get(const std::string& id);
  bool erase(const std::string& id);

  size_t bytes() const;
  size_t size() const;

 private:
  struct Entry {
    std::string id;
    std::shared_ptr<const StoredResponse> value;
    size_t bytes;
  };
  void evict_locked();

  mutable std::mutex mu_;
  size_t capacity_;
  size_t bytes_ = 0;
  std::list<Entry> lru_;  // front: most recently used
  std::unordered_map<std::string, std::list<Entry>::iterator> index_;
};

}  // namespace m2::server
