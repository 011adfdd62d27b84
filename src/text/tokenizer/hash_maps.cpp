#include "text/tokenizer/hash_maps.h"

#include <xxhash.h>

namespace m2::text::tok {
namespace {

size_t capacity_for(size_t n) {
  size_t cap = 16;
  while (cap < n * 2) cap <<= 1;  // load factor <= 1/2
  return cap;
}

uint32_t hash_string(std::string_view s) { return static_cast<uint32_t>(XXH3_64bits(s.data(), s.size())); }

}  // namespace

void StringIdMap::reserve(size_t n) {
  entries_.reserve(n);
  if (slots_.size() < capacity_for(n)) {
    slots_.assign(capacity_for(n), Slot{});
    for (size_t e = 0; e < entries_.size(); ++e) {
      const uint32_t h = hash_string(key_of(entries_[e]));
      for (size_t i = h & (slots_.size() - 1);; i = (i + 1) & (slots_.size() - 1)) {
        if (slots_[i].entry < 0) {
          slots_[i] = {h, static_cast<int32_t>(e)};
          break;
        }
      }
    }
  }
}

void StringIdMap::grow() { reserve(std::max<size_t>(16, count_ * 2)); }

void StringIdMap::insert(std::string_view key, int32_t id) {
  if (slots_.empty() || (count_ + 1) * 2 > slots_.size()) grow();
  const uint32_t h = hash_string(key);
  const size_t mask = slots_.size() - 1;
  for (size_t i = h & mask;; i = (i + 1) & mask) {
    Slot& s = slots_[i];
    if (s.entry < 0) {
      entries_.push_back({static_cast<uint32_t>(arena_.size()), static_cast<uint32_t>(key.size()), id});
      arena_.append(key);
      s = {h, static_cast<int32_t>(entries_.size() - 1)};
      ++count_;
      return;
    }
    if (s.hash == h && key_of(entries_[s.entry]) == key) {
      entries_[s.entry].id = id;
      return;
    }
  }
}

std::optional<int32_t> StringIdMap::find(std::string_view key) const {
  if (slots_.empty()) return std::nullopt;
  const uint32_t h = hash_string(key);
  const size_t mask = slots_.size() - 1;
  for (size_t i = h & mask;; i = (i + 1) & mask) {
    const Slot& s = slots_[i];
    if (s.entry < 0) return std::nullopt;
    if (s.hash == h && key_of(entries_[s.entry]) == key) return entries_[s.entry].id;
  }
}

void PairMap::reserve(size_t n) {
  if (slots_.size() >= capacity_for(n)) return;
  std::vector<Slot> old = std::move(slots_);
  slots_.assign(capacity_for(n), Slot{});
  mask_ = slots_.size() - 1;
  for (const Slot& s : old) {
    if (s.key == 0) continue;
    for (size_t i = mix(s.key) & mask_;; i = (i + 1) & mask_) {
      if (slots_[i].key == 0) {
        slots_[i] = s;
        break;
      }
    }
  }
}

void PairMap::grow() { reserve(std::max<size_t>(16, count_ * 2)); }

void PairMap::insert(int32_t left, int32_t right, MergeResult value) {
  if (slots_.empty() || (count_ + 1) * 2 > slots_.size()) grow();
  const uint64_t key = pack(left, right);
  for (size_t i = mix(key) & mask_;; i = (i + 1) & mask_) {
    Slot& s = slots_[i];
    if (s.key == 0) {
      s = {key, value};
      ++count_;
      return;
    }
    if (s.key == key) {
      s.value = value;
      return;
    }
  }
}

}  // namespace m2::text::tok
