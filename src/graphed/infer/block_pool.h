// infer/block_pool.h — the paged KV cache's block accounting: which of a fixed number of blocks are
// free, handed out all or nothing, and returned when a request finishes, is cancelled or is preempted.
// Block 0 is never handed out: padding tokens of a graphed step write their keys and values there.
// Plain integers, no torch (the tensors live in infer/paged_cache.h).
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
  /// Returns blocks taken by allocate(); each must be in use.
  void release(const std::vector<int64_t>& blocks);

  /// Blocks a request may use: all but the padding block.
  int64_t usable() const { return static_cast<int64_t>(in_use_.size()) - 1; }
  int64_t free_count() const { return static_cast<int64_t>(free_.size()); }
  int64_t used_count() const { return usable() - free_count(); }
  /// The most blocks in use at once so far.
  int64_t peak_used() const { return peak_used_; }

 private:
  std::vector<int64_t> free_;  // a stack: the most recently freed block is reused first
  std::vector<bool> in_use_;
  int64_t peak_used_ = 0;
};

/// Blocks that hold `tokens` tokens.
inline int64_t blocks_for(int64_t tokens, int64_t block_size) { return (tokens + block_size - 1) / block_size; }

}  // namespace graphed::infer
