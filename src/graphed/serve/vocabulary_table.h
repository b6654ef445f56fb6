// serve/vocabulary_table.h — the served tokenizer's vocabulary as the server needs it beside the running text: each
// id's text (the tokenizer's decode of that one id, as log probabilities name tokens) and its bytes (what the id adds
// to a decoded text: for a token that holds part of a character, its raw bytes), and, for structured output, the
// byte trie of the ids a grammar may allow. ServerVocabulary builds both once per server, when first needed, and
// shares them read-only with every request.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "graphed/grammar/token_mask.h"
#include "graphed/tokenizer/tokenizer.h"

namespace graphed::serve {

class VocabularyTable {
 public:
  /// Decodes every id of the tokenizer once (a few hundred milliseconds for 150,000 ids).
  explicit VocabularyTable(const tokenizer::Tokenizer& tokenizer);
  /// A table of given texts and bytes (tests): `grammar_usable[id]` false for special tokens and the like.
  VocabularyTable(std::vector<std::string> texts, std::vector<std::string> bytes, std::vector<bool> grammar_usable);

  int64_t size() const { return static_cast<int64_t>(texts_.size()); }
  /// The decode of the one id, special tokens written out ("<|endoftext|>"); "" for an id outside the vocabulary.
  const std::string& text(int64_t id) const;
  /// The bytes the id adds to a decoded text: its text's bytes, or for a part of a character (a byte-level or
  /// <0xXX> token whose text alone is U+FFFD) the raw bytes; "" for an id outside the vocabulary.
  const std::string& bytes(int64_t id) const;
  /// Whether a grammar may allow the id: false for a special token, an id without a token, and a part of a
  /// character whose raw bytes the tokenizer does not say.
  bool grammar_usable(int64_t id) const {
    return id >= 0 && id < size() && grammar_usable_[static_cast<std::size_t>(id)];
  }
  /// What a grammar sees of each id: its bytes where grammar_usable, else "" (never allowed).
  std::vector<std::string> grammar_bytes() const;

 private:
  std::vector<std::string> texts_;
  std::vector<std::string> bytes_;
  std::vector<bool> grammar_usable_;
};

/// The served model's vocabulary table and trie, each built on first use (thread-safe), then shared.
class ServerVocabulary {
 public:
  /// tokenizer: not owned; it outlives this.
  explicit ServerVocabulary(const tokenizer::Tokenizer& tokenizer) : tokenizer_(&tokenizer) {}

  std::shared_ptr<const VocabularyTable> table() const;
  /// The trie of table()'s grammar bytes (grammar/token_mask.h).
  std::shared_ptr<const grammar::TokenTrie> trie() const;

 private:
  const tokenizer::Tokenizer* tokenizer_;  // not owned
  mutable std::once_flag table_once_;
  mutable std::once_flag trie_once_;
  mutable std::shared_ptr<const VocabularyTable> table_;
  mutable std::shared_ptr<const grammar::TokenTrie> trie_;
};

}  // namespace graphed::serve
