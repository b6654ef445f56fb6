// grammar/detail/mask_search.cpp — the automaton over sets of stacks (one state per distinct set met, one
// transition per (state, byte) met, each computed once) and the depth-first walk of the trie over it.
//
// Why an automaton: inside a JSON string nearly every byte is accepted, so the walk visits nearly every trie
// node (393k for a 128k vocabulary), but the sets of stacks it passes through are few (a string's length counter
// times the position inside one character). Each node then costs a table lookup instead of a matcher step.
#include "graphed/grammar/detail/mask_search.h"

#include <algorithm>

#include "graphed/grammar/detail/hash_index.h"
#include "graphed/grammar/detail/stack_table.h"
#include "graphed/util/error.h"

namespace graphed::grammar::detail {

namespace {

constexpr std::int32_t kNoState = -1;
constexpr std::int32_t kUnknown = -2;  // a transition not computed yet
// The first states get a table of all 256 transitions (one load per trie node); the rest, if a grammar makes that
// many within a token's length, a hash of the transitions met, so memory stays bounded (1 KiB a dense state).
constexpr std::int32_t kDenseStates = 4096;

class StackSetAutomaton {
 public:
  // State 0 is the one written in state_key.
  StackSetAutomaton(const Grammar& grammar, const std::vector<std::int32_t>& state_key) : stacks_(grammar) {
    std::size_t at = 0;
    while (at < state_key.size()) {  // per stack: depth, then (rule, alternative, index) from the top down
      const std::size_t depth = static_cast<std::size_t>(state_key[at]);
      GRAPHED_INTERNAL_ASSERT(at + 1 + 3 * depth <= state_key.size(), "truncated matcher state key");
      std::int32_t stack = StackTable::kEmptyStack;
      for (std::size_t level = depth; level > 0; --level) {
        const std::size_t position = at + 1 + 3 * (level - 1);
        stack = stacks_.intern(Position{state_key[position], state_key[position + 1], state_key[position + 2]}, stack);
      }
      scratch_.push_back(stack);
      at += 1 + 3 * depth;
    }
    GRAPHED_INTERNAL_ASSERT(!scratch_.empty(), "empty matcher state key");
    intern_state();
  }

  /// The state after `byte`, or kNoState when no stack of `state` takes it.
  std::int32_t next(std::int32_t state, std::uint8_t byte) {
    if (state < kDenseStates) {
      const std::size_t entry = static_cast<std::size_t>(state) * 256 + byte;
      if (dense_targets_[entry] != kUnknown) return dense_targets_[entry];
      const std::int32_t target = compute_next(state, byte);
      dense_targets_[entry] = target;  // after compute_next(), which may grow dense_targets_
      return target;
    }
    if (!next_bytes_[static_cast<std::size_t>(state)].contains(byte)) return kNoState;
    const std::uint64_t edge = (static_cast<std::uint64_t>(state) << 8) | byte;
    const std::uint64_t hash = mix_hash(0, edge);
    const std::int32_t found =
        sparse_index_.find(hash, [&](std::int32_t id) { return sparse_edges_[static_cast<std::size_t>(id)] == edge; });
    if (found >= 0) return sparse_targets_[static_cast<std::size_t>(found)];
    const std::int32_t target = compute_next(state, byte);
    sparse_index_.insert(hash, static_cast<std::int32_t>(sparse_edges_.size()));
    sparse_edges_.push_back(edge);
    sparse_targets_.push_back(target);
    return target;
  }

 private:
  std::int32_t compute_next(std::int32_t state, std::uint8_t byte) {
    scratch_.clear();
    for (std::uint32_t at = state_begins_[static_cast<std::size_t>(state)];
         at < state_begins_[static_cast<std::size_t>(state) + 1]; ++at) {
      const std::int32_t stack = state_stacks_[at];
      if (!stacks_.expected(stack).contains(byte)) continue;
      const StackRange successors = stacks_.successors(stack);
      scratch_.insert(scratch_.end(), successors.begin(), successors.end());
    }
    GRAPHED_INTERNAL_ASSERT(scratch_.size() <= Matcher::kMaxStacks, "grammar matcher has more than ",
                            Matcher::kMaxStacks, " simultaneous readings; the grammar is too ambiguous");
    return scratch_.empty() ? kNoState : intern_state();
  }

  // The state of the stacks in scratch_ (sorted and deduplicated here).
  std::int32_t intern_state() {
    std::sort(scratch_.begin(), scratch_.end());
    scratch_.erase(std::unique(scratch_.begin(), scratch_.end()), scratch_.end());
    std::uint64_t hash = scratch_.size();
    for (std::int32_t stack : scratch_) hash = mix_hash(hash, static_cast<std::uint32_t>(stack));
    const std::int32_t found = state_index_.find(hash, [&](std::int32_t state) {
      const auto first = state_stacks_.begin() + state_begins_[static_cast<std::size_t>(state)];
      const auto last = state_stacks_.begin() + state_begins_[static_cast<std::size_t>(state) + 1];
      return std::equal(first, last, scratch_.begin(), scratch_.end());
    });
    if (found >= 0) return found;
    const auto state = static_cast<std::int32_t>(next_bytes_.size());
    ByteSet bytes;
    for (std::int32_t stack : scratch_) bytes.add(stacks_.expected(stack));
    next_bytes_.push_back(bytes);
    if (state < kDenseStates) dense_targets_.resize(dense_targets_.size() + 256, kUnknown);
    if (state_begins_.empty()) state_begins_.push_back(0);
    state_stacks_.insert(state_stacks_.end(), scratch_.begin(), scratch_.end());
    state_begins_.push_back(static_cast<std::uint32_t>(state_stacks_.size()));
    state_index_.insert(hash, state);
    return state;
  }

  StackTable stacks_;
  std::vector<std::int32_t> state_stacks_;   // each state's sorted stack ids, one state after another
  std::vector<std::uint32_t> state_begins_;  // state s holds state_stacks_[begins[s], begins[s + 1])
  std::vector<ByteSet> next_bytes_;          // per state: the bytes some stack of it takes
  HashIndex state_index_;
  std::vector<std::int32_t> dense_targets_;   // 256 per state below kDenseStates: target, kNoState or kUnknown
  std::vector<std::uint64_t> sparse_edges_;   // (state << 8) | byte, for the states past them
  std::vector<std::int32_t> sparse_targets_;  // the state after it, or kNoState
  HashIndex sparse_index_;
  std::vector<std::int32_t> scratch_;
};

// Scans the trie's depth-first listing once; a node whose byte the state above it refuses is skipped with its
// whole subtree. state_at[d] is the state after the first d bytes of the current node's path.
std::int32_t walk_trie(StackSetAutomaton& automaton, const TokenTrie& trie, std::uint32_t* words) {
  const std::vector<TokenTrie::ListedNode>& nodes = trie.listed_nodes();
  const std::vector<std::int32_t>& tokens = trie.listed_tokens();
  std::vector<std::int32_t> state_at{0};
  std::int32_t allowed = 0;
  const auto last = static_cast<std::int32_t>(nodes.size()) - 1;  // the end entry
  for (std::int32_t index = 1; index < last;) {
    const TokenTrie::ListedNode& node = nodes[static_cast<std::size_t>(index)];
    const std::int32_t state = state_at[static_cast<std::size_t>(node.depth) - 1];
    const std::int32_t target = automaton.next(state, node.byte);
    if (target == kNoState) {
      index = node.subtree_end;
      continue;
    }
    if (static_cast<std::size_t>(node.depth) == state_at.size()) state_at.push_back(target);
    state_at[static_cast<std::size_t>(node.depth)] = target;
    for (std::int32_t at = node.tokens_begin; at < nodes[static_cast<std::size_t>(index) + 1].tokens_begin; ++at) {
      const std::int32_t token = tokens[static_cast<std::size_t>(at)];
      words[static_cast<std::size_t>(token) / 32] |= std::uint32_t{1} << (token % 32);
      ++allowed;
    }
    ++index;
  }
  return allowed;
}

}  // namespace

std::int32_t search_mask(const Grammar& grammar, const TokenTrie& trie, const std::vector<std::int32_t>& state_key,
                         std::uint32_t* words) {
  StackSetAutomaton automaton(grammar, state_key);
  return walk_trie(automaton, trie, words);
}

}  // namespace graphed::grammar::detail
