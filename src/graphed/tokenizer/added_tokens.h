// tokenizer/added_tokens.h — AddedTokens: the tokens a tokenizer.json lists under "added_tokens"
// ("<|endoftext|>", "<|begin_of_text|>", ...), found in the text before any pre-tokenization and
// turned into their ids directly, as HF tokenizers' AddedVocabulary does: leftmost-longest match,
// single_word (no word character on either side), lstrip / rstrip (the whitespace beside the match
// goes with it). Tokens with normalized=false are looked for in the raw text, the others in the
// normalized pieces between those.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace graphed::tokenizer {

/// One entry of tokenizer.json's "added_tokens".
struct AddedToken {
  int64_t id = 0;
  std::string content;
  bool single_word = false;  ///< only where no word character (letter, mark, number, _) touches it
  bool lstrip = false;       ///< whitespace before it belongs to it
  bool rstrip = false;       ///< whitespace after it belongs to it
  bool normalized = false;   ///< matched in the normalized text rather than the raw text
  bool special = false;      ///< skipped by decode(ids, skip_special_tokens=true)
};

/// A piece of text: plain text to tokenize, or an added token already identified.
struct TextSegment {
  std::string_view text;
  std::optional<int64_t> token_id;
};

/// Finds one set of added tokens in text.
class AddedTokenMatcher {
 public:
  /// `tokens` are the ones to look for, with their content as it appears in the text to search.
  explicit AddedTokenMatcher(std::vector<AddedToken> tokens);

  /// The text split into segments covering all of it, added tokens identified. Empty text gives
  /// one empty plain segment.
  std::vector<TextSegment> split(std::string_view text) const;

  bool empty() const { return tokens_.empty(); }

 private:
  /// The longest token starting at `at`, as an index into tokens_.
  std::optional<std::size_t> longest_match_at(std::string_view text, std::size_t at) const;

  std::vector<AddedToken> tokens_;
  std::unordered_map<unsigned char, std::vector<std::size_t>> by_first_byte_;  // longest first
};

}  // namespace graphed::tokenizer
