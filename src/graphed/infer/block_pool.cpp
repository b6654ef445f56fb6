// infer/block_pool.cpp — see infer/block_pool.h.
#include "graphed/infer/block_pool.h"

#include <algorithm>

#include "graphed/util/error.h"

namespace graphed::infer {

BlockPool::BlockPool(int64_t blocks) : holders_(static_cast<std::size_t>(std::max<int64_t>(blocks, 0)), 0) {
  GRAPHED_CHECK(blocks >= 2, ConfigError, "the KV cache has room for ", blocks,
                " blocks, and it needs at least 2 (one is the padding block); fix: give the cache more memory or "
                "use smaller blocks");
  holders_[0] = 1;
  for (int64_t block = blocks - 1; block >= 1; --block) free_.push_back(block);
}

std::optional<std::vector<int64_t>> BlockPool::allocate(int64_t count) {
  GRAPHED_INTERNAL_ASSERT(count >= 0, "allocating ", count, " blocks");
  if (count > free_count()) return std::nullopt;
  std::vector<int64_t> blocks(free_.end() - count, free_.end());
  free_.resize(free_.size() - static_cast<std::size_t>(count));
  for (const int64_t block : blocks) holders_[static_cast<std::size_t>(block)] = 1;
  peak_used_ = std::max(peak_used_, used_count());
  return blocks;
}

void BlockPool::share(int64_t block) {
  GRAPHED_INTERNAL_ASSERT(block >= 1 && block < static_cast<int64_t>(holders_.size()) &&
                              holders_[static_cast<std::size_t>(block)] > 0,
                          "sharing block ", block, ", which is not in use");
  ++holders_[static_cast<std::size_t>(block)];
}

std::vector<int64_t> BlockPool::release(const std::vector<int64_t>& blocks) {
  std::vector<int64_t> freed;
  for (const int64_t block : blocks) {
    GRAPHED_INTERNAL_ASSERT(block >= 1 && block < static_cast<int64_t>(holders_.size()) &&
                                holders_[static_cast<std::size_t>(block)] > 0,
                            "releasing block ", block, ", which is not in use");
    if (--holders_[static_cast<std::size_t>(block)] > 0) continue;
    free_.push_back(block);
    freed.push_back(block);
  }
  return freed;
}

}  // namespace graphed::infer
