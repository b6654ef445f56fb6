// grammar/matcher.h — Matcher: a pushdown matcher that feeds bytes through a Grammar, with checkpoints to roll
// back, and its state written as a key (token masks are computed from it and cached under it). Torch-free;
// knows no tokens.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "graphed/grammar/grammar.h"

namespace graphed::grammar {

namespace detail {
class StackTable;
}

/// A place in a grammar: element `index` of alternative `alternative` of rule `rule`.
struct Position {
  int rule = 0;
  int alternative = 0;
  int index = 0;

  bool operator==(const Position& other) const {
    return rule == other.rule && alternative == other.alternative && index == other.index;
  }
  bool operator<(const Position& other) const {
    if (rule != other.rule) return rule < other.rule;
    if (alternative != other.alternative) return alternative < other.alternative;
    return index < other.index;
  }
};

/// Where the matcher is: the innermost position last. Every stack in a state is expanded so that its
/// last position stands at a byte set; an empty stack means the root rule is complete.
using Stack = std::vector<Position>;

/// Runs a grammar over bytes. Its state is a deduplicated set of stacks (one per way the bytes so far can be
/// read). A reference is expanded by moving the caller past it first and dropping the caller when that leaves it
/// at its end, so right recursion (R ::= item R | empty) runs in constant depth.
///
/// Stacks are interned (equal stacks are one integer, sharing the positions under their tops) and the stacks
/// that follow each stack after a byte are computed once, so accept() is a few lookups and a sort of integers.
/// Every accepted byte keeps the previous state in one flat history, so checkpoint()/rollback() cost nothing
/// but memory and allocate nothing once the history has grown; a long generation keeps one state per byte (a
/// few integers each for JSON). A copy is independent of the original. Not thread-safe, but const members may
/// run on several threads at once.
class Matcher {
 public:
  /// Grammars with more simultaneous readings than this, or deeper stacks, are reported as internal errors:
  /// graphed's compilers never make such grammars, and a runaway must not eat the host's memory.
  static constexpr std::size_t kMaxStacks = 20000;
  static constexpr std::size_t kMaxDepth = 10000;

  /// Starts at the beginning of the root rule. Validates the grammar (internal error if unusable).
  /// grammar: not owned; it outlives the matcher.
  explicit Matcher(const Grammar& grammar);
  Matcher(const Matcher& other);
  Matcher& operator=(const Matcher& other);
  Matcher(Matcher&& other) noexcept;
  Matcher& operator=(Matcher&& other) noexcept;
  ~Matcher();

  /// Advances every stack that can take the byte. Returns false and leaves the state unchanged if none can.
  bool accept(std::uint8_t byte);
  /// Accepts the bytes one by one; on the first refused byte, rolls back to the state before `text` and
  /// returns false.
  bool accept_text(std::string_view text);

  /// True when the bytes so far form a complete sentence of the root rule.
  bool can_finish() const;
  /// True when complete and no further byte can be accepted.
  bool accepts_nothing_more() const;
  /// The bytes some stack can take next.
  ByteSet next_bytes() const;

  /// A mark of the current state for rollback(): the count of bytes accepted so far.
  std::size_t checkpoint() const { return state_begins_.size() - 1; }
  /// Returns to the state at `checkpoint` (forgetting every byte accepted after it).
  void rollback(std::size_t checkpoint);
  /// Returns to the start.
  void reset() { rollback(0); }

  /// The current stacks, each bottom first, sorted; for tests and debugging (it builds them).
  std::vector<Stack> stacks() const;
  /// Writes the current state into `key` (cleared first) as integers that depend on the state alone, not on
  /// the history that led to it: two matchers of one grammar write equal keys exactly when their sets of stacks
  /// are equal. Per stack, in a fixed order: its depth, then (rule, alternative, index) of each position, the
  /// top first. Token masks are memoized under it (token_mask_cache.h) and computed from it (token_mask.h).
  void write_state(std::vector<std::int32_t>& key) const;

  const Grammar& grammar() const { return *grammar_; }

 private:
  const Grammar* grammar_;                     // not owned; outlives the matcher
  std::unique_ptr<detail::StackTable> table_;  // the interned stacks of every state in the history
  std::vector<std::int32_t> state_stacks_;     // the stack ids of each state, one state after another, each sorted
  std::vector<std::size_t> state_begins_;      // where each state begins in state_stacks_; back() is current
};

}  // namespace graphed::grammar
