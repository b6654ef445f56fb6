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

std::optional<std::vector<int64_t>> BlockPool::allocate(int64_t count, std::vector<int64_t>* evicted) {
  GRAPHED_INTERNAL_ASSERT(count >= 0, "allocating ", count, " blocks");
  if (count > free_count()) return std::nullopt;
  const int64_t plain = std::min<int64_t>(count, static_cast<int64_t>(free_.size()));
  std::vector<int64_t> blocks(free_.end() - plain, free_.end());
  free_.resize(free_.size() - static_cast<std::size_t>(plain));
  while (static_cast<int64_t>(blocks.size()) < count) {  // the oldest parked blocks, forgotten
    const int64_t block = parked_order_.front();
    parked_order_.pop_front();
    parked_.erase(block);
    blocks.push_back(block);
    if (evicted != nullptr) evicted->push_back(block);
  }
  for (const int64_t block : blocks) holders_[static_cast<std::size_t>(block)] = 1;
  peak_used_ = std::max(peak_used_, used_count());
  return blocks;
}

void BlockPool::share(int64_t block) {
  GRAPHED_INTERNAL_ASSERT(block >= 1 && block < static_cast<int64_t>(holders_.size()) &&
                              (holders_[static_cast<std::size_t>(block)] > 0 || is_parked(block)),
                          "sharing block ", block, ", which is neither in use nor parked");
  if (const auto found = parked_.find(block); found != parked_.end()) {
    parked_order_.erase(found->second);
    parked_.erase(found);
  }
  ++holders_[static_cast<std::size_t>(block)];
  peak_used_ = std::max(peak_used_, used_count());
}

std::vector<int64_t> BlockPool::release(const std::vector<int64_t>& blocks) {
  std::vector<int64_t> freed;
  for (const int64_t block : blocks) {
    GRAPHED_INTERNAL_ASSERT(
        block >= 1 && block < static_cast<int64_t>(holders_.size()) && holders_[static_cast<std::size_t>(block)] > 0,
        "releasing block ", block, ", which is not in use");
    if (--holders_[static_cast<std::size_t>(block)] > 0) continue;
    freed.push_back(block);
  }
  return freed;
}

void BlockPool::free(int64_t block) {
  GRAPHED_INTERNAL_ASSERT(holders_[static_cast<std::size_t>(block)] == 0 && !is_parked(block), "freeing block ", block,
                          ", which is held or parked");
  free_.push_back(block);
}

void BlockPool::park(int64_t block) {
  GRAPHED_INTERNAL_ASSERT(holders_[static_cast<std::size_t>(block)] == 0 && !is_parked(block), "parking block ", block,
                          ", which is held or parked");
  parked_[block] = parked_order_.insert(parked_order_.end(), block);
}

}  // namespace graphed::infer
