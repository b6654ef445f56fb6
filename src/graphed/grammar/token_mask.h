// grammar/token_mask.h — TokenTrie (a byte trie of a vocabulary) and allowed_tokens(): the tokens whose
// bytes a Matcher accepts from its current state, as a vocabulary-sized bitmask of uint32 words. Torch-free;
// applying the mask to logits on the device is the caller's business.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "graphed/grammar/matcher.h"

namespace graphed::grammar {

/// The vocabulary as a trie of bytes, built once per tokenizer. Token ids whose byte string is empty are
/// never allowed: pass an empty string for special tokens (end of sequence and the like), which the caller
/// allows itself when Matcher::can_finish() says so.
class TokenTrie {
 public:
  struct Node {
    std::vector<std::pair<std::uint8_t, std::int32_t>> children;  // (byte, node index), sorted by byte
    std::vector<std::int32_t> tokens;                             // token ids whose bytes end here
  };

  /// A node of the depth-first listing: the byte from its parent and where its subtree ends.
  struct ListedNode {
    std::int32_t subtree_end = 0;   // the index past its last descendant: where a walk goes to skip them
    std::int32_t tokens_begin = 0;  // its tokens are listed_tokens()[tokens_begin, next node's tokens_begin)
    std::int32_t depth = 0;         // bytes from the root (0 for the root)
    std::uint8_t byte = 0;          // the byte from its parent
  };

  /// token_bytes[id] is the byte string of token id.
  explicit TokenTrie(const std::vector<std::string>& token_bytes);

  std::int32_t vocabulary_size() const { return vocabulary_size_; }
  /// Node 0 is the root (the empty prefix).
  const Node& node(std::int32_t index) const { return nodes_[static_cast<std::size_t>(index)]; }
  std::size_t node_count() const { return nodes_.size(); }

  /// The same nodes in depth-first order (the root first, children by byte), plus one last entry past them
  /// (depth 0) whose tokens_begin ends the last node's tokens. A walk that scans it front to back and jumps to
  /// subtree_end to skip a refused prefix reads memory in order, which the linked nodes above do not.
  const std::vector<ListedNode>& listed_nodes() const { return listed_nodes_; }
  const std::vector<std::int32_t>& listed_tokens() const { return listed_tokens_; }

 private:
  void list_depth_first();

  std::vector<Node> nodes_;
  std::vector<ListedNode> listed_nodes_;
  std::vector<std::int32_t> listed_tokens_;
  std::int32_t vocabulary_size_ = 0;
};

/// The number of uint32 words of a bitmask over `vocabulary_size` tokens.
inline std::size_t bitmask_words(std::int32_t vocabulary_size) {
  return (static_cast<std::size_t>(vocabulary_size) + 31) / 32;
}

/// Bit `token` of the mask: word token / 32, bit token % 32.
inline bool is_allowed(const std::vector<std::uint32_t>& bitmask, std::int32_t token) {
  return (bitmask[static_cast<std::size_t>(token) / 32] >> (token % 32)) & 1u;
}

/// Sets bitmask (resized to bitmask_words(trie.vocabulary_size()), cleared) to the tokens whose whole byte
/// string the matcher accepts from its current state; a token is allowed even if the grammar is not
/// complete after it. Walks the trie depth first over an automaton built as it goes from the matcher's state
/// (each distinct set of stacks met is one automaton state, each of its transitions computed once), so a
/// prefix refused prunes every token under it. The matcher is not changed. Returns the count of allowed
/// tokens. Each call starts afresh; TokenMaskCache (token_mask_cache.h) keeps masks across calls and requests.
std::int32_t allowed_tokens(Matcher& matcher, const TokenTrie& trie, std::vector<std::uint32_t>& bitmask);

}  // namespace graphed::grammar
