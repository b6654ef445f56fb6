// tests/tokenizer/added_tokens_test.cpp — AddedTokenMatcher: leftmost-longest matching, single_word,
// lstrip and rstrip, as HF tokenizers' AddedVocabulary::find_matches.
#include "graphed/tokenizer/added_tokens.h"

#include <gtest/gtest.h>

namespace graphed::tokenizer {
namespace {

/// "text" for plain segments, "[id:text]" for added tokens.
std::vector<std::string> segments(const AddedTokenMatcher& matcher, const std::string& text) {
  std::vector<std::string> result;
  for (const TextSegment& segment : matcher.split(text)) {
    result.push_back(segment.token_id ? "[" + std::to_string(*segment.token_id) + ":" + std::string(segment.text) + "]"
                                      : std::string(segment.text));
  }
  return result;
}

AddedToken token(int64_t id, const std::string& content) {
  AddedToken result;
  result.id = id;
  result.content = content;
  result.special = true;
  return result;
}

using Segments = std::vector<std::string>;

TEST(AddedTokensTest, SplitsOutTheLeftmostLongestMatch) {
  const AddedTokenMatcher matcher({token(1, "<|a|>"), token(2, "<|a|>b"), token(3, "<|end|>")});
  EXPECT_EQ(segments(matcher, "x<|a|>by<|a|><|end|>"), (Segments{"x", "[2:<|a|>b]", "y", "[1:<|a|>]", "[3:<|end|>]"}));
  EXPECT_EQ(segments(matcher, "no tokens here"), (Segments{"no tokens here"}));
  EXPECT_EQ(segments(matcher, ""), (Segments{""}));
  EXPECT_EQ(segments(matcher, "<|end"), (Segments{"<|end"}));
}

TEST(AddedTokensTest, SingleWordTokensMatchOnlyBetweenNonWordCharacters) {
  AddedToken cat = token(7, "cat");
  cat.single_word = true;
  const AddedTokenMatcher matcher({cat});
  EXPECT_EQ(segments(matcher, "concat cat cats (cat)"), (Segments{"concat ", "[7:cat]", " cats (", "[7:cat]", ")"}));
  EXPECT_EQ(segments(matcher,
                     "\xC3\xA9"
                     "cat"),
            (Segments{"\xC3\xA9"
                      "cat"}));  // é is a letter
}

TEST(AddedTokensTest, LstripAndRstripTakeTheWhitespaceBesideTheToken) {
  AddedToken mask = token(4, "<mask>");
  mask.lstrip = true;
  const AddedTokenMatcher left({mask});
  EXPECT_EQ(segments(left, "a  <mask>  b"), (Segments{"a", "[4:  <mask>]", "  b"}));
  mask.lstrip = false;
  mask.rstrip = true;
  const AddedTokenMatcher right({mask});
  EXPECT_EQ(segments(right, "a  <mask> \n b"), (Segments{"a  ", "[4:<mask> \n ]", "b"}));
  mask.lstrip = true;
  const AddedTokenMatcher both({mask});
  EXPECT_EQ(segments(both, "<mask>  <mask>"),
            (Segments{"[4:<mask>  ]", "[4:<mask>]"}));  // lstrip never reaches into a match
}

}  // namespace
}  // namespace graphed::tokenizer
