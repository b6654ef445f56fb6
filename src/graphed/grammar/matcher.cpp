// grammar/matcher.cpp — the pushdown matcher over interned stacks: byte acceptance, the flat history behind
// checkpoints, and the state written as a key.
#include "graphed/grammar/matcher.h"

#include <algorithm>
#include <utility>

#include "graphed/grammar/detail/stack_table.h"
#include "graphed/util/error.h"

namespace graphed::grammar {

using detail::StackTable;

Matcher::Matcher(const Grammar& grammar) : grammar_(&grammar) {
  grammar.validate();
  table_ = std::make_unique<StackTable>(grammar);
  table_->start(state_stacks_);
  std::sort(state_stacks_.begin(), state_stacks_.end());
  state_stacks_.erase(std::unique(state_stacks_.begin(), state_stacks_.end()), state_stacks_.end());
  state_begins_.push_back(0);
}

Matcher::Matcher(const Matcher& other)
    : grammar_(other.grammar_),
      table_(std::make_unique<StackTable>(*other.table_)),
      state_stacks_(other.state_stacks_),
      state_begins_(other.state_begins_) {}

Matcher& Matcher::operator=(const Matcher& other) {
  if (this != &other) *this = Matcher(other);
  return *this;
}

Matcher::Matcher(Matcher&& other) noexcept = default;
Matcher& Matcher::operator=(Matcher&& other) noexcept = default;
Matcher::~Matcher() = default;

bool Matcher::accept(std::uint8_t byte) {
  // The next state is built after the current one in state_stacks_, which may reallocate: indices, not
  // iterators.
  const std::size_t begin = state_begins_.back();
  const std::size_t end = state_stacks_.size();
  for (std::size_t at = begin; at < end; ++at) {
    const std::int32_t stack = state_stacks_[at];
    if (!table_->expected(stack).contains(byte)) continue;  // the empty stack takes nothing
    const detail::StackRange next = table_->successors(stack);
    state_stacks_.insert(state_stacks_.end(), next.begin(), next.end());
  }
  if (state_stacks_.size() == end) return false;
  GRAPHED_INTERNAL_ASSERT(state_stacks_.size() - end <= kMaxStacks, "grammar matcher has more than ", kMaxStacks,
                          " simultaneous readings; the grammar is too ambiguous");
  const auto first = state_stacks_.begin() + static_cast<std::ptrdiff_t>(end);
  std::sort(first, state_stacks_.end());
  state_stacks_.erase(std::unique(first, state_stacks_.end()), state_stacks_.end());
  state_begins_.push_back(end);
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
  // Ids are sorted and the empty stack's id is the smallest, so it can only be first.
  const std::size_t begin = state_begins_.back();
  return begin < state_stacks_.size() && state_stacks_[begin] == StackTable::kEmptyStack;
}

bool Matcher::accepts_nothing_more() const { return can_finish() && next_bytes().empty(); }

ByteSet Matcher::next_bytes() const {
  ByteSet bytes;
  for (std::size_t at = state_begins_.back(); at < state_stacks_.size(); ++at) {
    bytes.add(table_->expected(state_stacks_[at]));
  }
  return bytes;
}

void Matcher::rollback(std::size_t checkpoint) {
  GRAPHED_INTERNAL_ASSERT(checkpoint < state_begins_.size(), "rollback to checkpoint ", checkpoint, " past the ",
                          state_begins_.size() - 1, " bytes accepted");
  if (checkpoint + 1 == state_begins_.size()) return;
  state_stacks_.resize(state_begins_[checkpoint + 1]);
  state_begins_.resize(checkpoint + 1);
}

std::vector<Stack> Matcher::stacks() const {
  std::vector<Stack> stacks;
  for (std::size_t at = state_begins_.back(); at < state_stacks_.size(); ++at) {
    stacks.emplace_back();
    table_->append_positions(state_stacks_[at], stacks.back());
  }
  std::sort(stacks.begin(), stacks.end());
  return stacks;
}

void Matcher::write_state(std::vector<std::int32_t>& key) const {
  // Each stack's integers first go to `flat` in id order (ids depend on the history); sorting the runs by
  // their contents gives an order that depends on the set of stacks alone.
  std::vector<std::int32_t> flat;
  std::vector<std::size_t> runs;
  for (std::size_t at = state_begins_.back(); at < state_stacks_.size(); ++at) {
    runs.push_back(flat.size());
    std::int32_t stack = state_stacks_[at];
    flat.push_back(table_->depth(stack));
    for (; stack != StackTable::kEmptyStack; stack = table_->parent(stack)) {
      const Position& top = table_->top(stack);
      flat.insert(flat.end(), {top.rule, top.alternative, top.index});
    }
  }
  const auto run_end = [&](std::size_t run) { return run + 1 + 3 * static_cast<std::size_t>(flat[run]); };
  std::sort(runs.begin(), runs.end(), [&](std::size_t left, std::size_t right) {
    return std::lexicographical_compare(
        flat.begin() + static_cast<std::ptrdiff_t>(left), flat.begin() + static_cast<std::ptrdiff_t>(run_end(left)),
        flat.begin() + static_cast<std::ptrdiff_t>(right), flat.begin() + static_cast<std::ptrdiff_t>(run_end(right)));
  });
  key.clear();
  key.reserve(flat.size());
  for (std::size_t run : runs) {
    key.insert(key.end(), flat.begin() + static_cast<std::ptrdiff_t>(run),
               flat.begin() + static_cast<std::ptrdiff_t>(run_end(run)));
  }
}

}  // namespace graphed::grammar
