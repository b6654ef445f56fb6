// infer/block_pool.cpp — see infer/block_pool.h.
#include "graphed/infer/block_pool.h"

#include <algorithm>

#include "graphed/util/error.h"

namespace graphed::infer {

BlockPool::BlockPool(int64_t blocks) : in_use_(static_cast<std::size_t>(std::max<int64_t>(blocks, 0)), false) {
  GRAPHED_CHECK(blocks >= 2, ConfigError, "the KV cache has room for ", blocks,
                " blocks, and it needs at least 2 (one is the padding block); fix: give the cache more memory or "
                "use smaller blocks");
  in_use_[0] = true;
  for (int64_t block = blocks - 1; block >= 1; --block) free_.push_back(block);
}

std::optional<std::vector<int64_t>> BlockPool::allocate(int64_t count) {
  GRAPHED_INTERNAL_ASSERT(count >= 0, "allocating ", count, " blocks");
  if (count > free_count()) return std::nullopt;
  std::vector<int64_t> blocks(free_.end() - count, free_.end());
  free_.resize(free_.size() - static_cast<std::size_t>(count));
  for (const int64_t block : blocks) in_use_[static_cast<std::size_t>(block)] = true;
  peak_used_ = std::max(peak_used_, used_count());
  return blocks;
}

void BlockPool::release(const std::vector<int64_t>& blocks) {
  for (const int64_t block : blocks) {
    GRAPHED_INTERNAL_ASSERT(block >= 1 && block < static_cast<int64_t>(in_use_.size()) &&
                                in_use_[static_cast<std::size_t>(block)],
                            "releasing block ", block, ", which is not in use");
    in_use_[static_cast<std::size_t>(block)] = false;
    free_.push_back(block);
  }
}

}  // namespace graphed::infer
