// infer/block_pool.h — the paged KV cache's block accounting: which of a fixed number of blocks are
// free, handed out all or nothing, shared by requests with the same prompt prefix (a count of holders
// per block), and returned when their last holder finishes, is cancelled or is preempted. Block 0 is
// never handed out: padding tokens of a graphed step write their keys and values there. Plain integers,
// no torch (the tensors live in infer/paged_cache.h).
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

namespace graphed::infer {

class BlockPool {
 public:
  /// `blocks` blocks in all (at least 2: block 0 is the padding block).
  explicit BlockPool(int64_t blocks);

  /// `count` free blocks, or nothing (and nothing taken) when fewer are free.
  std::optional<std::vector<int64_t>> allocate(int64_t count);
  /// One more holder of a block in use (a request sharing another's prompt prefix).
  void share(int64_t block);
  /// Drops one holder of each block (each must be in use); returns the blocks that became free.
  std::vector<int64_t> release(const std::vector<int64_t>& blocks);

  /// Blocks a request may use: all but the padding block.
  int64_t usable() const { return static_cast<int64_t>(holders_.size()) - 1; }
  int64_t free_count() const { return static_cast<int64_t>(free_.size()); }
  int64_t used_count() const { return usable() - free_count(); }
  /// The most blocks in use at once so far.
  int64_t peak_used() const { return peak_used_; }

 private:
  std::vector<int64_t> free_;  // a stack: the most recently freed block is reused first
  std::vector<int64_t> holders_;  // per block; the padding block always has one
  int64_t peak_used_ = 0;
};

/// Blocks that hold `tokens` tokens.
inline int64_t blocks_for(int64_t tokens, int64_t block_size) { return (tokens + block_size - 1) / block_size; }

}  // namespace graphed::infer
