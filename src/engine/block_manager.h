// The KV-cache block pool: per-sequence block tables over fixed-size blocks,
// and a prefix cache of full blocks keyed by a chained hash of their tokens
// (xxh3-64 of the block's ids, seeded with the previous block's hash), shared
// copy-free between sequences. Blocks no sequence uses keep their contents
// and hash (a later request with the same prefix revives them) until the
// pool runs dry and the least recently released one is evicted.
#pragma once

#include <cstdint>
#include <list>
#include <span>
#include <unordered_map>
#include <vector>

#include "engine/sequence.h"

namespace m2 {

struct PrefixCacheStats {
  int64_t queried_tokens = 0;  // prompt tokens looked up
  int64_t hit_tokens = 0;      // of which found in the cache
  int64_t evictions = 0;
};

class BlockManager {
 public:
  BlockManager(int64_t num_blocks, int block_size, bool enable_prefix_cache);

  int block_size() const { return block_size_; }
  int64_t num_blocks() const { return static_cast<int64_t>(blocks_.size()); }
  int64_t num_free_blocks() const;  // allocatable now: free + cached-unused
  int64_t num_used_blocks() const { return num_blocks() - num_free_blocks(); }
  const PrefixCacheStats& stats() const { return stats_; }

  // First allocation of a waiting sequence: reuses cached blocks of its
  // longest cached prefix (whole blocks, always leaving at least one token
  // to compute) and sets num_computed to the reused length. Allocates no
  // new block; does nothing if the sequence already holds blocks.
  void attach_cached_prefix(Sequence& seq);
  // Counts an admitted sequence's lookup in the hit-rate statistics.
  void count_lookup(const Sequence& seq);

  // Ensures seq.block_table covers `total_tokens` tokens; false (nothing
  // changed) if the pool cannot.
  bool ensure_capacity(Sequence& seq, int64_t total_tokens);
  // Blocks still needed for `total_tokens`.
  int64_t blocks_needed(const Sequence& seq, int64_t total_tokens) const;

  // Registers every full block whose tokens are all computed in the prefix cache.
  void commit_full_blocks(Sequence& seq);

  // Returns the sequence's blocks to the pool (cached ones stay revivable).
  void release(Sequence& seq);
  // Forgets every cached block (SGLang's flush_cache): no later lookup hits
  // one; unreferenced cached blocks become free, blocks in use stay with
  // their sequences. Returns the number of blocks forgotten.
  int64_t flush_prefix_cache();

  // KV slot of a token position of a sequence.
  int64_t slot(const Sequence& seq, int64_t position) const {
    return static_cast<int64_t>(seq.block_table[position / block_size_]) * block_size_ + position % block_size_;
  }

  static uint64_t chain_hash(uint64_t prev, std::span<const int32_t> block_tokens);

 private:
  struct Block {
    int ref_count = 0;
    uint64_t hash = 0;
    bool hashed = false;
    std::vector<int32_t> tokens;          // for hashed blocks: guards against collisions
    std::list<int32_t>::iterator lru_pos;  // valid while ref_count == 0 and hashed
  };

  int32_t take_block();  // a free block, else evicts the least recently used cached one; -1 if none
  void drop_hash(int32_t b);

  int block_size_;
  bool prefix_cache_;
  std::vector<Block> blocks_;
  std::vector<int32_t> free_;                    // never-hashed or evicted blocks
  std::list<int32_t> lru_;                       // cached, unreferenced; front = oldest
  std::unordered_map<uint64_t, int32_t> by_hash_;
  PrefixCacheStats stats_;
};

}  // namespace m2
