// grammar/detail/mask_search.h — search_mask(): the tokens a grammar accepts from one state, found by walking
// the vocabulary trie depth first over a lazily built automaton whose states are sets of interned stacks.
// Internal to grammar/: allowed_tokens() and TokenMaskCache call it; it needs no Matcher, only the state's key.
#pragma once

#include <cstdint>
#include <vector>

#include "graphed/grammar/grammar.h"
#include "graphed/grammar/token_mask.h"

namespace graphed::grammar::detail {

/// Sets in `words` (bitmask_words(trie.vocabulary_size()) words, all zero on entry) the tokens whose whole byte
/// string the grammar accepts from the state written as `state_key` (Matcher::write_state of a matcher of this
/// grammar); returns their count. Thread-safe: it reads the grammar and the trie, and keeps its tables local.
std::int32_t search_mask(const Grammar& grammar, const TokenTrie& trie, const std::vector<std::int32_t>& state_key,
                         std::uint32_t* words);

}  // namespace graphed::grammar::detail
