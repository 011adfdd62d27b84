// Immutable-after-build open-addressing hash maps for the vocabulary
// (token string -> id) and the merge table ((left id, right id) -> rank and
// result). Built once at load; lookups are read-only and thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace m2::text::tok {

class StringIdMap {
 public:
  // Sizes the table for `n` keys; call before insert.
  void reserve(size_t n);
  // Inserts or overwrites (a later duplicate key wins, as in serde's maps).
  void insert(std::string_view key, int32_t id);
  std::optional<int32_t> find(std::string_view key) const;
  size_t size() const { return count_; }

 private:
  struct Slot {
    uint32_t hash = 0;
    int32_t entry = -1;  // index into entries_, -1 = empty
  };
  struct Entry {
    uint32_t offset;
    uint32_t length;
    int32_t id;
  };
  std::string_view key_of(const Entry& e) const { return {arena_.data() + e.offset, e.length}; }
  void grow();
  std::vector<Slot> slots_;
  std::vector<Entry> entries_;
  std::string arena_;
  size_t count_ = 0;
};

struct MergeResult {
  uint32_t rank;
  int32_t id;
};

class PairMap {
 public:
  void reserve(size_t n);
  void insert(int32_t left, int32_t right, MergeResult value);  // later wins
  const MergeResult* find(int32_t left, int32_t right) const {
    if (slots_.empty()) return nullptr;
    const uint64_t key = pack(left, right);
    for (size_t i = mix(key) & mask_;; i = (i + 1) & mask_) {
      const Slot& s = slots_[i];
      if (s.key == key) return &s.value;
      if (s.key == 0) return nullptr;
    }
  }
  size_t size() const { return count_; }

 private:
  // Ids are non-negative int32, so key + 1 never wraps and 0 marks an empty slot.
  static uint64_t pack(int32_t l, int32_t r) {
    return ((static_cast<uint64_t>(static_cast<uint32_t>(l)) << 32) | static_cast<uint32_t>(r)) + 1;
  }
  static uint64_t mix(uint64_t k) {
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdULL;
    k ^= k >> 33;
    return k;
  }
  void grow();
  struct Slot {
    uint64_t key = 0;
    MergeResult value{};
  };
  std::vector<Slot> slots_;
  size_t mask_ = 0;
  size_t count_ = 0;
};

}  // namespace m2::text::tok
