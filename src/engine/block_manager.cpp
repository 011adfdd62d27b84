#include "engine/block_manager.h"

#include <xxhash.h>

#include <algorithm>

namespace m2 {

BlockManager::BlockManager(int64_t num_blocks, int block_size, bool enable_prefix_cache)
    : block_size_(block_size), prefix_cache_(enable_prefix_cache), blocks_(num_blocks) {
  free_.reserve(num_blocks);
  for (int64_t b = num_blocks - 1; b >= 0; --b) free_.push_back(static_cast<int32_t>(b));
}

uint64_t BlockManager::chain_hash(uint64_t prev, std::span<const int32_t> block_tokens) {
  return XXH3_64bits_withSeed(block_tokens.data(), block_tokens.size_bytes(), prev);
}

int64_t BlockManager::num_free_blocks() const { return static_cast<int64_t>(free_.size() + lru_.size()); }

void BlockManager::drop_hash(int32_t b) {
  Block& blk = blocks_[b];
  if (!blk.hashed) return;
  auto it = by_hash_.find(blk.hash);
  if (it != by_hash_.end() && it->second == b) by_hash_.erase(it);
  blk.hashed = false;
  blk.tokens.clear();
}

int32_t BlockManager::take_block() {
  if (!free_.empty()) {
    const int32_t b = free_.back();
    free_.pop_back();
    return b;
  }
  if (lru_.empty()) return -1;
  const int32_t b = lru_.front();  // least recently released cached block
  lru_.pop_front();
  drop_hash(b);
  ++stats_.evictions;
  return b;
}

void BlockManager::attach_cached_prefix(Sequence& seq) {
  if (!seq.block_table.empty()) return;
  seq.num_computed = 0;
  seq.block_hashes.clear();
  const int64_t n = seq.num_tokens();
  if (!prefix_cache_) return;
  // At most (n - 1) tokens may come from the cache: the last one must be
  // computed to produce logits.
  const int64_t max_blocks = (n - 1) / block_size_;
  uint64_t h = 0;
  for (int64_t i = 0; i < max_blocks; ++i) {
    std::span<const int32_t> toks(seq.tokens.data() + i * block_size_, block_size_);
    h = chain_hash(h, toks);
    auto it = by_hash_.find(h);
    if (it == by_hash_.end()) break;
    Block& blk = blocks_[it->second];
    if (!std::equal(toks.begin(), toks.end(), blk.tokens.begin(), blk.tokens.end())) break;
    if (blk.ref_count == 0) lru_.erase(blk.lru_pos);
    ++blk.ref_count;
    seq.block_table.push_back(it->second);
    seq.block_hashes.push_back(h);
  }
  seq.num_computed = static_cast<int64_t>(seq.block_table.size()) * block_size_;
}

void BlockManager::count_lookup(const Sequence& seq) {
  stats_.queried_tokens += seq.num_prompt_tokens;
  stats_.hit_tokens += std::min(seq.num_computed, seq.num_prompt_tokens);
}

int64_t BlockManager::blocks_needed(const Sequence& seq, int64_t total_tokens) const {
  const int64_t need = (total_tokens + block_size_ - 1) / block_size_;
  return std::max<int64_t>(0, need - static_cast<int64_t>(seq.block_table.size()));
}

bool BlockManager::ensure_capacity(Sequence& seq, int64_t total_tokens) {
  const int64_t extra = blocks_needed(seq, total_tokens);
  if (extra > num_free_blocks()) return false;
  for (int64_t i = 0; i < extra; ++i) {
    const int32_t b = take_block();
    blocks_[b].ref_count = 1;
    seq.block_table.push_back(b);
  }
  return true;
}

void BlockManager::commit_full_blocks(Sequence& seq) {
  if (!prefix_cache_ || !seq.cacheable) return;
  const int64_t full = std::min<int64_t>(seq.num_computed / block_size_, static_cast<int64_t>(seq.block_table.size()));
  uint64_t h = seq.block_hashes.empty() ? 0 : seq.block_hashes.back();
  for (int64_t i = static_cast<int64_t>(seq.block_hashes.size()); i < full; ++i) {
    std::span<const int32_t> toks(seq.tokens.data() + i * block_size_, block_size_);
    h = chain_hash(h, toks);
    seq.block_hashes.push_back(h);
    const int32_t b = seq.block_table[i];
    Block& blk = blocks_[b];
    if (blk.hashed) continue;
    if (by_hash_.count(h)) continue;  // an identical block is already cached: keep that one as the canonical copy
    blk.hashed = true;
    blk.hash = h;
    blk.tokens.assign(toks.begin(), toks.end());
    by_hash_[h] = b;
  }
}

int64_t BlockManager::flush_prefix_cache() {
  int64_t n = 0;
  for (int32_t b = 0; b < static_cast<int32_t>(blocks_.size()); ++b) {
    if (!blocks_[b].hashed) continue;
    drop_hash(b);
    ++n;
  }
  for (int32_t b : lru_) free_.push_back(b);
  lru_.clear();
  by_hash_.clear();
  return n;
}

void BlockManager::release(Sequence& seq) {
  // Release in reverse so that a sequence's last blocks are evicted first
  // (they are the least likely to be shared).
  for (auto it = seq.block_table.rbegin(); it != seq.block_table.rend(); ++it) {
    Block& blk = blocks_[*it];
    if (--blk.ref_count > 0) continue;
    if (blk.hashed) {
      blk.lru_pos = lru_.insert(lru_.end(), *it);
    } else {
      free_.push_back(*it);
    }
  }
  seq.block_table.clear();
  seq.block_hashes.clear();
}

}  // namespace m2
