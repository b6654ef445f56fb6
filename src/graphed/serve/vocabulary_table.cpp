// serve/vocabulary_table.cpp — see serve/vocabulary_table.h. A byte-level BPE token that is part of a character
// decodes alone to U+FFFD; its vocabulary entry says its bytes (GPT-2's byte-to-unicode map, or <0xXX> for byte
// fallback), and those are what it adds to the text the stream decoder puts together, so they are what a grammar
// must see.
#include "graphed/serve/vocabulary_table.h"

#include <optional>
#include <utility>

#include "graphed/tokenizer/byte_level.h"
#include "graphed/util/error.h"

namespace graphed::serve {
namespace {

const std::string kReplacementCharacter = "\xEF\xBF\xBD";  // U+FFFD in UTF-8

int hex_digit(char digit) {
  if (digit >= '0' && digit <= '9') return digit - '0';
  if (digit >= 'A' && digit <= 'F') return digit - 'A' + 10;
  if (digit >= 'a' && digit <= 'f') return digit - 'a' + 10;
  return -1;
}

/// The raw bytes of a vocabulary entry that is part of a character: "<0xE2>" (byte fallback, the byte tokenizer)
/// or a byte-level entry ("âĢ"); nullopt when the entry says neither.
std::optional<std::string> raw_bytes_of(const std::string& entry) {
  if (entry.size() == 6 && entry.compare(0, 3, "<0x") == 0 && entry[5] == '>' && hex_digit(entry[3]) >= 0 &&
      hex_digit(entry[4]) >= 0) {
    return std::string(1, static_cast<char>(hex_digit(entry[3]) * 16 + hex_digit(entry[4])));
  }
  return tokenizer::from_byte_level(entry);
}

}  // namespace

VocabularyTable::VocabularyTable(const tokenizer::Tokenizer& tokenizer) {
  const int64_t size = tokenizer.vocab_size();
  texts_.resize(static_cast<std::size_t>(size));
  bytes_.resize(static_cast<std::size_t>(size));
  grammar_usable_.assign(static_cast<std::size_t>(size), false);
  for (int64_t id = 0; id < size; ++id) {
    const auto index = static_cast<std::size_t>(id);
    try {
      texts_[index] = tokenizer.decode({id}, /*skip_special_tokens=*/false);
    } catch (const Error&) {
      continue;  // an id no vocabulary entry uses: no text, never allowed
    }
    bytes_[index] = texts_[index];
    const bool special = tokenizer.is_special(id);
    bool exact = true;
    if (!special && texts_[index].find(kReplacementCharacter) != std::string::npos) {
      const auto raw = raw_bytes_of(tokenizer.token_text(id));
      if (raw) bytes_[index] = *raw;
      exact = raw.has_value();
    }
    grammar_usable_[index] = !special && exact && !bytes_[index].empty();
  }
}

VocabularyTable::VocabularyTable(std::vector<std::string> texts, std::vector<std::string> bytes,
                                 std::vector<bool> grammar_usable)
    : texts_(std::move(texts)), bytes_(std::move(bytes)), grammar_usable_(std::move(grammar_usable)) {
  GRAPHED_INTERNAL_ASSERT(texts_.size() == bytes_.size() && texts_.size() == grammar_usable_.size(),
                          "a vocabulary table's columns differ in length");
}

const std::string& VocabularyTable::text(int64_t id) const {
  static const std::string kNone;
  return id >= 0 && id < size() ? texts_[static_cast<std::size_t>(id)] : kNone;
}

const std::string& VocabularyTable::bytes(int64_t id) const {
  static const std::string kNone;
  return id >= 0 && id < size() ? bytes_[static_cast<std::size_t>(id)] : kNone;
}

std::vector<std::string> VocabularyTable::grammar_bytes() const {
  std::vector<std::string> bytes(bytes_.size());
  for (std::size_t id = 0; id < bytes_.size(); ++id) {
    if (grammar_usable_[id]) bytes[id] = bytes_[id];
  }
  return bytes;
}

std::shared_ptr<const VocabularyTable> ServerVocabulary::table() const {
  std::call_once(table_once_, [this] { table_ = std::make_shared<const VocabularyTable>(*tokenizer_); });
  return table_;
}

std::shared_ptr<const grammar::TokenTrie> ServerVocabulary::trie() const {
  std::call_once(trie_once_, [this] { trie_ = std::make_shared<const grammar::TokenTrie>(table()->grammar_bytes()); });
  return trie_;
}

}  // namespace graphed::serve
