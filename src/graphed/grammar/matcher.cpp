// grammar/matcher.cpp — the pushdown matcher: stack expansion, byte acceptance, checkpoints.
#include "graphed/grammar/matcher.h"

#include <algorithm>
#include <utility>

#include "graphed/util/error.h"

namespace graphed::grammar {

namespace {

void sort_unique(std::vector<Stack>& stacks) {
  std::sort(stacks.begin(), stacks.end());
  stacks.erase(std::unique(stacks.begin(), stacks.end()), stacks.end());
}

}  // namespace

Matcher::Matcher(const Grammar& grammar) : grammar_(&grammar) {
  grammar.validate();
  std::vector<Stack> start;
  const Rule& root = grammar.rule(grammar.root());
  for (int alternative = 0; alternative < static_cast<int>(root.alternatives.size()); ++alternative) {
    expand(Stack{Position{grammar.root(), alternative, 0}}, start);
  }
  sort_unique(start);
  history_.push_back(std::move(start));
}

// Brings a stack to a byte set on top (or to empty), fanning out at each rule reference. Validation
// refused left recursion, so every path through here ends.
void Matcher::expand(Stack stack, std::vector<Stack>& out) const {
  for (;;) {
    if (stack.empty()) {
      out.push_back(std::move(stack));
      break;
    }
    const Position top = stack.back();
    const Sequence& sequence = grammar_->rule(top.rule).alternatives[static_cast<std::size_t>(top.alternative)];
    if (top.index == static_cast<int>(sequence.size())) {  // rule complete: the caller was moved on already
      stack.pop_back();
      continue;
    }
    const Element& element = sequence[static_cast<std::size_t>(top.index)];
    if (!element.is_rule()) {
      out.push_back(std::move(stack));
      break;
    }
    // Move the caller past the reference; drop it when that completes it (a tail call keeps depth flat).
    stack.back().index += 1;
    if (stack.back().index == static_cast<int>(sequence.size())) stack.pop_back();
    GRAPHED_INTERNAL_ASSERT(stack.size() < kMaxDepth, "grammar matcher stack deeper than ", kMaxDepth, " at rule '",
                            grammar_->rule(element.rule).name, "'");
    const int count = static_cast<int>(grammar_->rule(element.rule).alternatives.size());
    for (int alternative = 0; alternative < count; ++alternative) {
      Stack branch = stack;
      branch.push_back(Position{element.rule, alternative, 0});
      expand(std::move(branch), out);
    }
    break;
  }
  GRAPHED_INTERNAL_ASSERT(out.size() <= kMaxStacks, "grammar matcher has more than ", kMaxStacks,
                          " simultaneous readings; the grammar is too ambiguous");
}

bool Matcher::accept(std::uint8_t byte) {
  std::vector<Stack> next;
  for (const Stack& stack : history_.back()) {
    if (stack.empty()) continue;
    const Position& top = stack.back();
    const Element& element =
        grammar_->rule(top.rule)
            .alternatives[static_cast<std::size_t>(top.alternative)][static_cast<std::size_t>(top.index)];
    if (!element.bytes.contains(byte)) continue;
    Stack advanced = stack;
    advanced.back().index += 1;
    expand(std::move(advanced), next);
  }
  if (next.empty()) return false;
  sort_unique(next);
  history_.push_back(std::move(next));
  return true;
}

bool Matcher::accept_text(std::string_view text) {
  const std::size_t start = checkpoint();
  for (char byte : text) {
    if (!accept(static_cast<std::uint8_t>(byte))) {
      rollback(start);
      return false;
    }
  }
  return true;
}

bool Matcher::can_finish() const {
  const std::vector<Stack>& stacks = history_.back();
  return std::any_of(stacks.begin(), stacks.end(), [](const Stack& stack) { return stack.empty(); });
}

bool Matcher::accepts_nothing_more() const { return can_finish() && next_bytes().empty(); }

ByteSet Matcher::next_bytes() const {
  ByteSet bytes;
  for (const Stack& stack : history_.back()) {
    if (stack.empty()) continue;
    const Position& top = stack.back();
    bytes.add(grammar_->rule(top.rule)
                  .alternatives[static_cast<std::size_t>(top.alternative)][static_cast<std::size_t>(top.index)]
                  .bytes);
  }
  return bytes;
}

void Matcher::rollback(std::size_t checkpoint) {
  GRAPHED_INTERNAL_ASSERT(checkpoint < history_.size(), "rollback to checkpoint ", checkpoint, " past the ",
                          history_.size() - 1, " bytes accepted");
  history_.resize(checkpoint + 1);
}

}  // namespace graphed::grammar
