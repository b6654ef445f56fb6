// grammar/matcher.h — Matcher: a pushdown matcher that feeds bytes through a Grammar, with checkpoints to
// roll back (the token-mask search tries many continuations from one state). Torch-free; knows no tokens.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "graphed/grammar/grammar.h"

namespace graphed::grammar {

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

/// Runs a grammar over bytes. Its state is a deduplicated, sorted set of stacks (one per way the bytes so
/// far can be read). A reference is expanded by moving the caller past it first and dropping the caller
/// when that leaves it at its end, so right recursion (R ::= item R | empty) runs in constant depth.
///
/// Every accepted byte keeps the previous state, so checkpoint()/rollback() cost nothing but memory; a
/// long generation keeps one state per byte (a few stacks each for JSON).
class Matcher {
 public:
  /// Grammars with more simultaneous readings than this, or deeper stacks, are reported as internal errors:
  /// graphed's compilers never make such grammars, and a runaway must not eat the host's memory.
  static constexpr std::size_t kMaxStacks = 20000;
  static constexpr std::size_t kMaxDepth = 10000;

  /// Starts at the beginning of the root rule. Validates the grammar (internal error if unusable).
  /// grammar: not owned; it outlives the matcher.
  explicit Matcher(const Grammar& grammar);

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
  std::size_t checkpoint() const { return history_.size() - 1; }
  /// Returns to the state at `checkpoint` (forgetting every byte accepted after it).
  void rollback(std::size_t checkpoint);
  /// Returns to the start.
  void reset() { rollback(0); }

  /// The current stacks, for tests.
  const std::vector<Stack>& stacks() const { return history_.back(); }

 private:
  void expand(Stack stack, std::vector<Stack>& out) const;

  const Grammar* grammar_;                   // not owned; outlives the matcher
  std::vector<std::vector<Stack>> history_;  // the state after each accepted byte; back() is current
};

}  // namespace graphed::grammar
