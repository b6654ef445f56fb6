// infer/prefix_cache.h — which cache blocks hold the keys and values of which prompt prefixes, so that
// a request whose prompt starts with the same full blocks of tokens as a running one's shares those
// blocks instead of computing them again (a shared system prompt). A block is known by a hash chained
// over every token from the start of the prompt to its end, while a request holds it or while it is
// parked in the pool after its last holder ended; a block the pool hands out anew is forgotten. Plain
// integers, no torch.
#pragma once

#include <cstdint>
#include <unordered_map>
#include <vector>

namespace graphed::infer {

class PrefixCache {
 public:
  /// The hash of a block of tokens after a prefix whose hash is `previous` (0 for the first block).
  static uint64_t chain(uint64_t previous, const int64_t* tokens, int64_t count);

  struct Match {
    std::vector<int64_t> blocks;
    std::vector<uint64_t> hashes;
  };
  /// The cached blocks holding `tokens`' first full blocks, in order, at most `limit` of them.
  Match match(const std::vector<int64_t>& tokens, int64_t block_size, int64_t limit) const;
  /// Records that `block` holds the prefix hashed `hash` (a block already recorded for it stays).
  void insert(uint64_t hash, int64_t block);
  /// Forgets blocks whose contents are gone.
  void forget(const std::vector<int64_t>& blocks);
  bool knows(int64_t block) const { return hash_of_block_.count(block) > 0; }
  int64_t size() const { return static_cast<int64_t>(block_of_hash_.size()); }

 private:
  std::unordered_map<uint64_t, int64_t> block_of_hash_;
  std::unordered_map<int64_t, uint64_t> hash_of_block_;
};

}  // namespace graphed::infer
