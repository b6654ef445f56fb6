// grammar/detail/stack_table.h — StackTable: the matcher's stacks interned as nodes of one tree (a position on
// top of a parent stack), so a stack is one integer, equal stacks share it, and the stacks that follow a stack
// after a byte are computed once and then looked up. Internal to grammar/: Matcher and the mask search use it.
#pragma once

#include <cstdint>
#include <vector>

#include "graphed/grammar/detail/hash_index.h"
#include "graphed/grammar/matcher.h"

namespace graphed::grammar::detail {

/// A run of stack ids stored in a StackTable; valid until the table next grows.
struct StackRange {
  const std::int32_t* first = nullptr;
  const std::int32_t* last = nullptr;

  const std::int32_t* begin() const { return first; }
  const std::int32_t* end() const { return last; }
  std::size_t size() const { return static_cast<std::size_t>(last - first); }
};

/// Stacks of one grammar by id. The empty stack (the root complete) is kEmptyStack; every other id names a
/// position and the id of the stack under it. Not thread-safe: each Matcher and each mask search owns one.
class StackTable {
 public:
  static constexpr std::int32_t kEmptyStack = -1;

  /// grammar: not owned; it outlives the table.
  explicit StackTable(const Grammar& grammar);

  /// The id of the stack `position` on top of `parent`: the same id whenever the contents are the same.
  std::int32_t intern(const Position& position, std::int32_t parent);
  /// Appends the stacks of the root rule's start, expanded, as Matcher's first state.
  void start(std::vector<std::int32_t>& out);
  /// Appends what `stack` expands to: stacks whose top stands at a byte set, or the empty stack. A reference is
  /// expanded by moving the caller past it first, dropping the caller when that completes it.
  void expand(std::int32_t stack, std::vector<std::int32_t>& out);
  /// The stacks after the byte set on top of `stack` takes a byte it holds: the top moved on one element, then
  /// expanded. Computed on the first call for a stack, looked up after; not deduplicated (as expand()).
  StackRange successors(std::int32_t stack);

  /// The bytes the top of `stack` takes: empty for the empty stack or a top that is not at a byte set.
  const ByteSet& expected(std::int32_t stack) const {
    return stack == kEmptyStack ? empty_bytes_ : *nodes_[static_cast<std::size_t>(stack)].expected;
  }
  const Position& top(std::int32_t stack) const { return nodes_[static_cast<std::size_t>(stack)].top; }
  std::int32_t parent(std::int32_t stack) const { return nodes_[static_cast<std::size_t>(stack)].parent; }
  /// The count of positions on the stack (0 for the empty stack).
  std::int32_t depth(std::int32_t stack) const {
    return stack == kEmptyStack ? 0 : nodes_[static_cast<std::size_t>(stack)].depth;
  }
  /// Appends the stack's positions, the bottom one first.
  void append_positions(std::int32_t stack, Stack& out) const;

 private:
  struct Node {
    Position top;
    std::int32_t parent = kEmptyStack;
    std::int32_t depth = 0;
    const ByteSet* expected = nullptr;   // the byte set at top, or empty_bytes_; points into the grammar
    std::int32_t successors_begin = -1;  // into successors_; -1 until successors() first runs
    std::int32_t successors_end = -1;
  };

  static std::uint64_t hash_of(const Position& position, std::int32_t parent);
  void check_readings(std::size_t count) const;

  const Grammar* grammar_;  // not owned; outlives the table
  ByteSet empty_bytes_;
  std::vector<Node> nodes_;
  std::vector<std::int32_t> successors_;  // every memoized successor list, one after another
  std::vector<std::int32_t> scratch_;     // successors() expands into it before storing
  HashIndex index_;                       // (position, parent) -> id
};

}  // namespace graphed::grammar::detail
