// infer/prefix_cache.cpp — see infer/prefix_cache.h. The chain hash: FNV-1a's prime over each token's
// 64 bits, each step passed through a SplitMix64 finaliser, so that nearby ids and orders differ.
#include "graphed/infer/prefix_cache.h"

namespace graphed::infer {
namespace {

uint64_t finalise(uint64_t x) {
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

}  // namespace

uint64_t PrefixCache::chain(uint64_t previous, const int64_t* tokens, int64_t count) {
  uint64_t hash = finalise(previous ^ 0xcbf29ce484222325ULL);
  for (int64_t i = 0; i < count; ++i) hash = finalise((hash ^ static_cast<uint64_t>(tokens[i])) * 0x100000001b3ULL);
  return hash;
}

PrefixCache::Match PrefixCache::match(const std::vector<int64_t>& tokens, int64_t block_size, int64_t limit) const {
  Match result;
  uint64_t hash = 0;
  for (int64_t i = 0; i < limit && (i + 1) * block_size <= static_cast<int64_t>(tokens.size()); ++i) {
    hash = chain(hash, tokens.data() + i * block_size, block_size);
    const auto found = block_of_hash_.find(hash);
    if (found == block_of_hash_.end()) break;
    result.blocks.push_back(found->second);
    result.hashes.push_back(hash);
  }
  return result;
}

void PrefixCache::insert(uint64_t hash, int64_t block) {
  if (block_of_hash_.count(hash) > 0 || hash_of_block_.count(block) > 0) return;
  block_of_hash_[hash] = block;
  hash_of_block_[block] = hash;
}

void PrefixCache::forget(const std::vector<int64_t>& blocks) {
  for (const int64_t block : blocks) {
    const auto found = hash_of_block_.find(block);
    if (found == hash_of_block_.end()) continue;
    block_of_hash_.erase(found->second);
    hash_of_block_.erase(found);
  }
}

}  // namespace graphed::infer
