// infer/block_pool.h — the paged KV cache's block accounting: which of a fixed number of blocks are
// free, handed out all or nothing, shared by requests with the same prompt prefix (a count of holders
// per block), and returned when their last holder finishes, is cancelled or is preempted. A returned
// block whose contents the prefix cache still knows can be parked instead of freed: it counts as free,
// a later request with that prefix takes it back, and allocation reuses parked blocks, oldest first,
// only when no plain free block is left (the caller then forgets them). Block 0 is never handed out:
// padding tokens of a graphed step write their keys and values there. Plain integers, no torch.
#pragma once

#include <cstdint>
#include <list>
#include <optional>
#include <unordered_map>
#include <vector>

namespace graphed::infer {

class BlockPool {
 public:
  /// `blocks` blocks in all (at least 2: block 0 is the padding block).
  explicit BlockPool(int64_t blocks);

  /// `count` free blocks, or nothing (and nothing taken) when fewer are free. Parked blocks it had to take
  /// are appended to `evicted` (their old contents are gone).
  std::optional<std::vector<int64_t>> allocate(int64_t count, std::vector<int64_t>* evicted = nullptr);
  /// One more holder of a block in use or parked (a request sharing another's prompt prefix).
  void share(int64_t block);
  /// Drops one holder of each block (each must be in use); returns the blocks no one holds any more,
  /// which the caller passes to free() or park().
  std::vector<int64_t> release(const std::vector<int64_t>& blocks);
  /// A block no one holds goes back to the free blocks.
  void free(int64_t block);
  /// A block no one holds stays as it is until allocate() needs it.
  void park(int64_t block);
  bool is_parked(int64_t block) const { return parked_.count(block) > 0; }

  /// Blocks a request may use: all but the padding block.
  int64_t usable() const { return static_cast<int64_t>(holders_.size()) - 1; }
  /// Free and parked blocks.
  int64_t free_count() const { return static_cast<int64_t>(free_.size() + parked_order_.size()); }
  int64_t used_count() const { return usable() - free_count(); }
  /// The most blocks in use at once so far.
  int64_t peak_used() const { return peak_used_; }

 private:
  std::vector<int64_t> free_;        // a stack: the most recently freed block is reused first
  std::list<int64_t> parked_order_;  // oldest first
  std::unordered_map<int64_t, std::list<int64_t>::iterator> parked_;
  std::vector<int64_t> holders_;  // per block; the padding block always has one
  int64_t peak_used_ = 0;
};

/// Blocks that hold `tokens` tokens.
inline int64_t blocks_for(int64_t tokens, int64_t block_size) { return (tokens + block_size - 1) / block_size; }

}  // namespace graphed::infer
