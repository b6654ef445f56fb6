// grammar/token_mask.cpp — building the vocabulary trie; allowed_tokens() hands the matcher's state to the
// mask search (detail/mask_search.h).
#include "graphed/grammar/token_mask.h"

#include <algorithm>

#include "graphed/grammar/detail/mask_search.h"

namespace graphed::grammar {

TokenTrie::TokenTrie(const std::vector<std::string>& token_bytes)
    : vocabulary_size_(static_cast<std::int32_t>(token_bytes.size())) {
  nodes_.emplace_back();
  for (std::int32_t token = 0; token < vocabulary_size_; ++token) {
    const std::string& bytes = token_bytes[static_cast<std::size_t>(token)];
    if (bytes.empty()) continue;  // special tokens: the caller's business
    std::int32_t node = 0;
    for (char character : bytes) {
      const auto byte = static_cast<std::uint8_t>(character);
      auto& children = nodes_[static_cast<std::size_t>(node)].children;
      auto found = std::lower_bound(
          children.begin(), children.end(), byte,
          [](const std::pair<std::uint8_t, std::int32_t>& child, std::uint8_t value) { return child.first < value; });
      if (found != children.end() && found->first == byte) {
        node = found->second;
        continue;
      }
      const auto child = static_cast<std::int32_t>(nodes_.size());
      children.insert(found, {byte, child});  // `children` is not used after nodes_ grows below
      nodes_.emplace_back();
      node = child;
    }
    nodes_[static_cast<std::size_t>(node)].tokens.push_back(token);
  }
  list_depth_first();
}

void TokenTrie::list_depth_first() {
  listed_nodes_.reserve(nodes_.size() + 1);
  struct Open {
    std::int32_t node;
    std::int32_t listed;     // its index in listed_nodes_
    std::size_t next_child;  // the next of its children to list
  };
  std::vector<Open> path;  // the open nodes from the root down; an explicit stack, as tokens may be long
  const auto list = [&](std::int32_t node, std::uint8_t byte) {
    ListedNode listed;
    listed.tokens_begin = static_cast<std::int32_t>(listed_tokens_.size());
    listed.depth = static_cast<std::int32_t>(path.size());
    listed.byte = byte;
    const std::vector<std::int32_t>& tokens = nodes_[static_cast<std::size_t>(node)].tokens;
    listed_tokens_.insert(listed_tokens_.end(), tokens.begin(), tokens.end());
    path.push_back(Open{node, static_cast<std::int32_t>(listed_nodes_.size()), 0});
    listed_nodes_.push_back(listed);
  };
  list(0, 0);
  while (!path.empty()) {
    Open& open = path.back();
    const auto& children = nodes_[static_cast<std::size_t>(open.node)].children;
    if (open.next_child == children.size()) {
      listed_nodes_[static_cast<std::size_t>(open.listed)].subtree_end =
          static_cast<std::int32_t>(listed_nodes_.size());
      path.pop_back();
      continue;
    }
    const auto [byte, child] = children[open.next_child++];
    list(child, byte);  // may reallocate path: `open` is not used after
  }
  ListedNode end;  // ends the last node's tokens
  end.tokens_begin = static_cast<std::int32_t>(listed_tokens_.size());
  end.subtree_end = static_cast<std::int32_t>(listed_nodes_.size()) + 1;
  listed_nodes_.push_back(end);
}

std::int32_t allowed_tokens(Matcher& matcher, const TokenTrie& trie, std::vector<std::uint32_t>& bitmask) {
  bitmask.assign(bitmask_words(trie.vocabulary_size()), 0);
  std::vector<std::int32_t> state_key;
  matcher.write_state(state_key);
  return detail::search_mask(matcher.grammar(), trie, state_key, bitmask.data());
}

}  // namespace graphed::grammar
