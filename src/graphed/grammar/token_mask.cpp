// grammar/token_mask.cpp — building the vocabulary trie and the depth-first mask search.
#include "graphed/grammar/token_mask.h"

#include <algorithm>

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
}

namespace {

std::int32_t visit(Matcher& matcher, const TokenTrie& trie, std::int32_t node, std::vector<std::uint32_t>& bitmask) {
  std::int32_t allowed = 0;
  const ByteSet next = matcher.next_bytes();  // one cheap test before copying stacks
  for (const auto& [byte, child] : trie.node(node).children) {
    if (!next.contains(byte)) continue;
    const std::size_t mark = matcher.checkpoint();
    if (!matcher.accept(byte)) continue;
    for (std::int32_t token : trie.node(child).tokens) {
      bitmask[static_cast<std::size_t>(token) / 32] |= std::uint32_t{1} << (token % 32);
      ++allowed;
    }
    allowed += visit(matcher, trie, child, bitmask);
    matcher.rollback(mark);
  }
  return allowed;
}

}  // namespace

std::int32_t allowed_tokens(Matcher& matcher, const TokenTrie& trie, std::vector<std::uint32_t>& bitmask) {
  bitmask.assign(bitmask_words(trie.vocabulary_size()), 0);
  return visit(matcher, trie, 0, bitmask);
}

}  // namespace graphed::grammar
