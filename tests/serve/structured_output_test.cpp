// tests/serve/structured_output_test.cpp — the server's vocabulary table (a token that is part of a character has
// its raw bytes) and GrammarConstraint, the engine's view of a grammar: on a small vocabulary (every byte, JSON
// pieces, words, an end token), seeded random walks that draw any allowed token never meet an empty mask, allow the
// end token only where the document is complete, and always end in JSON that parses and satisfies the schema.
#include "graphed/serve/structured_output.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "graphed/grammar/json_schema.h"
#include "graphed/serve/vocabulary_table.h"
#include "graphed/tokenizer/tokenizer.h"

namespace graphed::serve {
namespace {

using PlainJson = nlohmann::json;  // not "json": the other files of a unity batch mean ordered_json by it

/// Every byte (text: itself if ASCII, else U+FFFD, as a byte-level token's decode gives it), JSON pieces, the
/// schema's words, then the end token (special: text only).
std::shared_ptr<const VocabularyTable> walk_vocabulary() {
  std::vector<std::string> texts, bytes;
  std::vector<bool> usable;
  for (int byte = 0; byte < 256; ++byte) {
    bytes.emplace_back(1, static_cast<char>(byte));
    texts.push_back(byte < 0x80 ? bytes.back() : "\xEF\xBF\xBD");
    usable.push_back(true);
  }
  for (const char* piece : {"{\"",  "\":",  "\",\"", "\"}",      "\":\"",   "\",",     "true", "false",  "null",
                            "12",   "345",  "-7",    "color",    "\"red\"", "green",   "blue", "name",   "count",
                            "flag", " the", "ab",    "\xc3\xa9", "\\n",     "\\u00e9", "\\\"", "\":{\"", "\"}}"}) {
    texts.emplace_back(piece);
    bytes.emplace_back(piece);
    usable.push_back(true);
  }
  texts.emplace_back("<|end|>");
  bytes.emplace_back("<|end|>");
  usable.push_back(false);
  return std::make_shared<const VocabularyTable>(std::move(texts), std::move(bytes), std::move(usable));
}

constexpr const char* kWalkSchema = R"({"type": "object", "properties": {
    "color": {"enum": ["red", "green", "blue"]}, "name": {"type": "string", "maxLength": 8},
    "count": {"type": "integer"}, "flag": {"type": "boolean"}},
  "required": ["color", "name", "count"], "additionalProperties": false})";

std::size_t code_point_count(const std::string& text) {
  std::size_t count = 0;
  for (char byte : text) count += (static_cast<unsigned char>(byte) & 0xC0) != 0x80;
  return count;
}

/// Whether `document` satisfies kWalkSchema (as a reference validator would).
bool satisfies_walk_schema(const PlainJson& document) {
  if (!document.is_object() || !document.contains("color") || !document.contains("name") ||
      !document.contains("count")) {
    return false;
  }
  for (const auto& [key, value] : document.items()) {
    if (key == "color" && !(value == "red" || value == "green" || value == "blue")) return false;
    if (key == "name" && !(value.is_string() && code_point_count(value.get<std::string>()) <= 8)) return false;
    // An integer of 20 digits is past int64: nlohmann-json reads it as a double, of an integral value.
    if (key == "count" &&
        !(value.is_number_integer() || (value.is_number() && std::floor(value.get<double>()) == value.get<double>()))) {
      return false;
    }
    if (key == "flag" && !value.is_boolean()) return false;
    if (key != "color" && key != "name" && key != "count" && key != "flag") return false;
  }
  return true;
}

struct Walk {
  std::string text;
  bool ended = false;  // drew the end token, or the constraint said it was finished
};

/// Draws uniformly among the allowed ids (with `extra_words` of padding past the vocabulary, as a padded model's
/// mask has) until the end token or the constraint's end, checking every mask on the way.
Walk random_walk(GrammarConstraint& constraint, const VocabularyTable& table, int64_t end, std::mt19937& random,
                 int extra_words) {
  const int64_t word_count =
      static_cast<int64_t>(grammar::bitmask_words(static_cast<int32_t>(table.size()))) + extra_words;
  std::vector<std::uint32_t> words(static_cast<std::size_t>(word_count), 0xFFFFFFFFu);
  Walk walk;
  for (int step = 0; step < 1000 && !walk.ended; ++step) {
    if (constraint.finished()) {
      walk.ended = true;
      break;
    }
    constraint.allowed(words.data(), word_count);
    std::vector<int64_t> allowed;
    for (int64_t id = 0; id < word_count * 32; ++id) {
      if ((words[static_cast<std::size_t>(id / 32)] >> (id % 32)) & 1u) allowed.push_back(id);
    }
    EXPECT_FALSE(allowed.empty()) << "an empty mask after " << walk.text;
    if (allowed.empty()) break;
    EXPECT_LT(allowed.back(), table.size()) << "an id past the vocabulary allowed after " << walk.text;
    const bool may_end = std::find(allowed.begin(), allowed.end(), end) != allowed.end();
    EXPECT_EQ(may_end, PlainJson::accept(walk.text)) << "the end token's bit after " << walk.text;
    const int64_t token = allowed[std::uniform_int_distribution<std::size_t>(0, allowed.size() - 1)(random)];
    constraint.accept(token);
    if (token == end) {
      walk.ended = true;
    } else {
      walk.text += table.bytes(token);
    }
  }
  return walk;
}

TEST(StructuredOutputTest, EveryWalkEndsInADocumentOfTheSchema) {
  const auto table = walk_vocabulary();
  const auto trie = std::make_shared<const grammar::TokenTrie>(table->grammar_bytes());
  const int64_t end = table->size() - 1;
  auto compiled = std::make_shared<CompiledGrammar>(grammar::compile_json_schema_text(kWalkSchema), "json_schema");
  for (int seed = 0; seed < 50; ++seed) {
    std::mt19937 random(static_cast<unsigned>(seed));
    GrammarConstraint constraint(compiled, table, trie, {end});  // the choices of one request share the grammar
    const Walk walk = random_walk(constraint, *table, end, random, seed % 3);
    SCOPED_TRACE(walk.text);
    ASSERT_TRUE(walk.ended);
    const PlainJson document = PlainJson::parse(walk.text, nullptr, /*allow_exceptions=*/false);
    ASSERT_FALSE(document.is_discarded());
    EXPECT_TRUE(satisfies_walk_schema(document)) << document.dump();
  }
}

/// With no end token (ignore_eos, no stop ids) a document that cannot go on finishes the constraint itself.
TEST(StructuredOutputTest, ACompleteDocumentFinishesTheConstraint) {
  const auto table = walk_vocabulary();
  const auto trie = std::make_shared<const grammar::TokenTrie>(table->grammar_bytes());
  auto compiled = std::make_shared<CompiledGrammar>(grammar::any_json_object(), "json_object");
  GrammarConstraint constraint(compiled, table, trie, {});
  std::vector<std::uint32_t> words(grammar::bitmask_words(static_cast<int32_t>(table->size())));
  constraint.allowed(words.data(), static_cast<int64_t>(words.size()));
  EXPECT_TRUE((words['{' / 32] >> ('{' % 32)) & 1u);
  EXPECT_FALSE((words['[' / 32] >> ('[' % 32)) & 1u);
  constraint.accept('{');
  EXPECT_FALSE(constraint.finished());
  constraint.accept('}');
  EXPECT_TRUE(constraint.finished());
}

/// A token the mask did not allow (never drawn by the engine) ends the request rather than the engine.
TEST(StructuredOutputTest, ARefusedTokenFinishesTheConstraint) {
  const auto table = walk_vocabulary();
  const auto trie = std::make_shared<const grammar::TokenTrie>(table->grammar_bytes());
  auto compiled = std::make_shared<CompiledGrammar>(grammar::any_json_object(), "json_object");
  GrammarConstraint constraint(compiled, table, trie, {table->size() - 1});
  constraint.accept('x');
  EXPECT_TRUE(constraint.finished());
}

/// The byte tokenizer's ids past ASCII decode alone to U+FFFD; their bytes are the raw byte, which a grammar sees.
TEST(StructuredOutputTest, APartOfACharacterHasItsRawBytes) {
  const std::unique_ptr<tokenizer::Tokenizer> bytes = tokenizer::load_tokenizer("bytes");
  const VocabularyTable table(*bytes);
  ASSERT_EQ(table.size(), 256);
  EXPECT_EQ(table.text('a'), "a");
  EXPECT_EQ(table.bytes('a'), "a");
  EXPECT_EQ(table.text(0xC3), "\xEF\xBF\xBD");
  EXPECT_EQ(table.bytes(0xC3), "\xC3");
  EXPECT_TRUE(table.grammar_usable(0xC3));
  EXPECT_EQ(table.text(300), "");  // outside the vocabulary
  EXPECT_FALSE(table.grammar_usable(300));
  EXPECT_EQ(table.grammar_bytes()[0xA9], "\xA9");
}

}  // namespace
}  // namespace graphed::serve
