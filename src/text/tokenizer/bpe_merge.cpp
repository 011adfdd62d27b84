// The two merge loops of the BPE model. HF merges the pair of lowest rank,
// leftmost on ties (a heap of (rank, position) with stale entries skipped);
// for the short pre-tokens of real text a rescan of a rank array is faster,
// for long ones (tens of KB of one letter) the heap keeps it O(n log n).
// A stale heap entry is always recognised: the pair now at its position
// concatenates to a longer string, hence another token id.
#include <cstdint>
#include <limits>
#include <queue>
#include <vector>

#include "text/tokenizer/bpe_model.h"

namespace m2::text::tok::bpe_detail {

void merge_by_heap(const PairMap& merges, std::vector<int32_t>& ids);

void merge_by_scan(const PairMap& merges, std::vector<int32_t>& ids) {
  constexpr uint32_t kNone = std::numeric_limits<uint32_t>::max();
  const size_t n = ids.size();
  if (n < 2) return;
  if (n > 64) return merge_by_heap(merges, ids);
  // ranks[i], results[i]: merge of (ids[i], ids[i+1]).
  uint32_t ranks[64];
  int32_t results[64];
  auto set_pair = [&](size_t i) {
    const MergeResult* m = merges.find(ids[i], ids[i + 1]);
    ranks[i] = m ? m->rank : kNone;
    results[i] = m ? m->id : -1;
  };
  for (size_t i = 0; i + 1 < n; ++i) set_pair(i);
  size_t len = n;
  while (len > 1) {
    size_t best = 0;
    for (size_t i = 1; i + 1 < len; ++i) {
      if (ranks[i] < ranks[best]) best = i;
    }
    if (ranks[best] == kNone) break;
    ids[best] = results[best];
    for (size_t i = best + 1; i + 1 < len; ++i) {
      ids[i] = ids[i + 1];
      ranks[i] = ranks[i + 1];
      results[i] = results[i + 1];
    }
    --len;
    if (best + 1 < len) set_pair(best);
    if (best > 0) set_pair(best - 1);
  }
  ids.resize(len);
}

void merge_by_heap(const PairMap& merges, std::vector<int32_t>& ids) {
  struct Symbol {
    int32_t id;
    int64_t prev;
    int64_t next;
    bool removed;
  };
  struct Entry {
    uint32_t rank;
    size_t pos;
    int32_t result;
    bool operator>(const Entry& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
  };
  const size_t n = ids.size();
  if (n < 2) return;
  std::vector<Symbol> sym(n);
  for (size_t i = 0; i < n; ++i) {
    sym[i] = {ids[i], static_cast<int64_t>(i) - 1, i + 1 < n ? static_cast<int64_t>(i + 1) : -1, false};
  }
  std::priority_queue<Entry, std::vector<Entry>, std::greater<Entry>> queue;
  for (size_t i = 0; i + 1 < n; ++i) {
    if (const MergeResult* m = merges.find(ids[i], ids[i + 1])) queue.push({m->rank, i, m->id});
  }
  while (!queue.empty()) {
    const Entry top = queue.top();
    queue.pop();
    Symbol& left = sym[top.pos];
    if (left.removed || left.next < 0) continue;
    const size_t right_pos = static_cast<size_t>(left.next);
    const MergeResult* current = merges.find(left.id, sym[right_pos].id);
    if (!current || current->id != top.result) continue;  // stale entry
    left.id = top.result;
    left.next = sym[right_pos].next;
    sym[right_pos].removed = true;
    if (left.next >= 0) sym[left.next].prev = static_cast<int64_t>(top.pos);
    if (left.prev >= 0) {
      if (const MergeResult* m = merges.find(sym[left.prev].id, left.id)) {
        queue.push({m->rank, static_cast<size_t>(left.prev), m->id});
      }
    }
    if (left.next >= 0) {
      if (const MergeResult* m = merges.find(left.id, sym[left.next].id)) queue.push({m->rank, top.pos, m->id});
    }
  }
  ids.clear();
  for (const Symbol& s : sym) {
    if (!s.removed) ids.push_back(s.id);
  }
}

}  // namespace m2::text::tok::bpe_detail
