// grammar/detail/stack_table.cpp — interning stacks, their expansion (the matcher's rules for references and
// completed rules) and the memoized successors of each stack.
#include "graphed/grammar/detail/stack_table.h"

#include <algorithm>

#include "graphed/util/error.h"

namespace graphed::grammar::detail {

StackTable::StackTable(const Grammar& grammar) : grammar_(&grammar) {}

std::uint64_t StackTable::hash_of(const Position& position, std::int32_t parent) {
  std::uint64_t hash = mix_hash(static_cast<std::uint32_t>(position.rule), static_cast<std::uint32_t>(parent));
  return mix_hash(hash, (std::uint64_t{static_cast<std::uint32_t>(position.alternative)} << 32) |
                            static_cast<std::uint32_t>(position.index));
}

std::int32_t StackTable::intern(const Position& position, std::int32_t parent) {
  const std::uint64_t hash = hash_of(position, parent);
  const std::int32_t found = index_.find(hash, [&](std::int32_t id) {
    const Node& node = nodes_[static_cast<std::size_t>(id)];
    return node.parent == parent && node.top == position;
  });
  if (found >= 0) return found;
  Node node;
  node.top = position;
  node.parent = parent;
  node.depth = depth(parent) + 1;
  const Sequence& sequence = grammar_->rule(position.rule).alternatives[static_cast<std::size_t>(position.alternative)];
  const bool at_bytes = position.index < static_cast<int>(sequence.size()) &&
                        !sequence[static_cast<std::size_t>(position.index)].is_rule();
  node.expected = at_bytes ? &sequence[static_cast<std::size_t>(position.index)].bytes : &empty_bytes_;
  const auto id = static_cast<std::int32_t>(nodes_.size());
  nodes_.push_back(node);
  index_.insert(hash, id);
  return id;
}

void StackTable::start(std::vector<std::int32_t>& out) {
  const int root = grammar_->root();
  const int count = static_cast<int>(grammar_->rule(root).alternatives.size());
  for (int alternative = 0; alternative < count; ++alternative) {
    expand(intern(Position{root, alternative, 0}, kEmptyStack), out);
  }
}

// Validation refused left recursion, so every path through here ends.
void StackTable::expand(std::int32_t stack, std::vector<std::int32_t>& out) {
  for (;;) {
    if (stack == kEmptyStack) {
      out.push_back(stack);
      break;
    }
    const Position top = this->top(stack);
    const std::int32_t below = parent(stack);
    const Sequence& sequence = grammar_->rule(top.rule).alternatives[static_cast<std::size_t>(top.alternative)];
    if (top.index == static_cast<int>(sequence.size())) {  // rule complete: the caller was moved on already
      stack = below;
      continue;
    }
    const Element& element = sequence[static_cast<std::size_t>(top.index)];
    if (!element.is_rule()) {
      out.push_back(stack);
      break;
    }
    // Move the caller past the reference; drop it when that completes it (a tail call keeps depth flat).
    const Position moved{top.rule, top.alternative, top.index + 1};
    const std::int32_t caller = moved.index == static_cast<int>(sequence.size()) ? below : intern(moved, below);
    GRAPHED_INTERNAL_ASSERT(static_cast<std::size_t>(depth(caller)) < Matcher::kMaxDepth,
                            "grammar matcher stack deeper than ", Matcher::kMaxDepth, " at rule '",
                            grammar_->rule(element.rule).name, "'");
    const int count = static_cast<int>(grammar_->rule(element.rule).alternatives.size());
    for (int alternative = 0; alternative < count; ++alternative) {
      expand(intern(Position{element.rule, alternative, 0}, caller), out);
    }
    break;
  }
  check_readings(out.size());
}

void StackTable::check_readings(std::size_t count) const {
  GRAPHED_INTERNAL_ASSERT(count <= Matcher::kMaxStacks, "grammar matcher has more than ", Matcher::kMaxStacks,
                          " simultaneous readings; the grammar is too ambiguous");
}

StackRange StackTable::successors(std::int32_t stack) {
  if (nodes_[static_cast<std::size_t>(stack)].successors_begin < 0) {
    const Position top = this->top(stack);
    const std::int32_t advanced = intern(Position{top.rule, top.alternative, top.index + 1}, parent(stack));
    scratch_.clear();
    expand(advanced, scratch_);
    Node& node = nodes_[static_cast<std::size_t>(stack)];  // after expand(), which may grow nodes_
    node.successors_begin = static_cast<std::int32_t>(successors_.size());
    successors_.insert(successors_.end(), scratch_.begin(), scratch_.end());
    node.successors_end = static_cast<std::int32_t>(successors_.size());
  }
  const Node& node = nodes_[static_cast<std::size_t>(stack)];
  return StackRange{successors_.data() + node.successors_begin, successors_.data() + node.successors_end};
}

void StackTable::append_positions(std::int32_t stack, Stack& out) const {
  const std::size_t first = out.size();
  for (; stack != kEmptyStack; stack = parent(stack)) out.push_back(top(stack));
  std::reverse(out.begin() + static_cast<std::ptrdiff_t>(first), out.end());
}

}  // namespace graphed::grammar::detail
