// tests/tokenizer/split_pattern_test.cpp — the hand-written GPT-2, Llama-3 and Qwen2 matchers give the
// pieces their regexes give (splits worked out by hand from the regex's leftmost-first alternation),
// and tokenizer.json pattern texts are recognised exactly.
#include "graphed/tokenizer/split_pattern.h"

#include <gtest/gtest.h>

#include "tokenizer_fixtures.h"

namespace graphed::tokenizer {
namespace {

std::vector<std::string> pieces(const std::string& text, SplitPattern pattern) {
  std::vector<std::string> result;
  for (const std::string_view piece : split_with_pattern(text, pattern)) result.emplace_back(piece);
  return result;
}

using Pieces = std::vector<std::string>;
const std::string kMixed = "I'm 12345 h\xC3\xA9llo\n\n  world";

TEST(SplitPatternTest, Gpt2SplitsContractionsNumbersAccentsAndWhitespaceRuns) {
  EXPECT_EQ(pieces(kMixed, SplitPattern::kGpt2), (Pieces{"I", "'m", " 12345", " h\xC3\xA9llo", "\n\n ", " world"}));
}

TEST(SplitPatternTest, Llama3KeepsThreeDigitsAndSplitsLineBreaksFromSpaces) {
  EXPECT_EQ(pieces(kMixed, SplitPattern::kLlama3),
            (Pieces{"I", "'m", " ", "123", "45", " h\xC3\xA9llo", "\n\n", " ", " world"}));
}

TEST(SplitPatternTest, Qwen2SplitsSingleDigits) {
  EXPECT_EQ(pieces(kMixed, SplitPattern::kQwen2),
            (Pieces{"I", "'m", " ", "1", "2", "3", "4", "5", " h\xC3\xA9llo", "\n\n", " ", " world"}));
}

TEST(SplitPatternTest, ContractionsAreCaseSensitiveOnlyForGpt2) {
  EXPECT_EQ(pieces("I'M HE'S we'll", SplitPattern::kGpt2), (Pieces{"I", "'", "M", " HE", "'", "S", " we", "'ll"}));
  EXPECT_EQ(pieces("I'M HE'S we'Ll", SplitPattern::kLlama3), (Pieces{"I", "'M", " HE", "'S", " we", "'Ll"}));
  // Simple case folding: long s (U+017F) matches 's' under (?i).
  EXPECT_EQ(pieces("it'\xC5\xBF", SplitPattern::kLlama3), (Pieces{"it", "'\xC5\xBF"}));
}

TEST(SplitPatternTest, Llama3AttachesOnePunctuationOrSpaceCharacterToAWord) {
  EXPECT_EQ(pieces("(hello \tworld", SplitPattern::kLlama3), (Pieces{"(hello", " ", "\tworld"}));
  EXPECT_EQ(pieces("(hello \tworld", SplitPattern::kGpt2), (Pieces{"(", "hello", " ", "\t", "world"}));
  EXPECT_EQ(pieces("'quoted'", SplitPattern::kLlama3), (Pieces{"'quoted", "'"}));
}

TEST(SplitPatternTest, Llama3KeepsLineBreaksAfterPunctuation) {
  EXPECT_EQ(pieces("end.\n\nNext", SplitPattern::kLlama3), (Pieces{"end", ".\n\n", "Next"}));
  EXPECT_EQ(pieces("a \r\n b", SplitPattern::kLlama3), (Pieces{"a", " \r\n", " b"}));
}

TEST(SplitPatternTest, TrailingWhitespaceStaysWholeAndSpacesBeforeAWordKeepOneForIt) {
  EXPECT_EQ(pieces("a   ", SplitPattern::kGpt2), (Pieces{"a", "   "}));
  EXPECT_EQ(pieces("a   b", SplitPattern::kGpt2), (Pieces{"a", "  ", " b"}));
  EXPECT_EQ(pieces("a \n", SplitPattern::kGpt2), (Pieces{"a", " \n"}));
  EXPECT_EQ(pieces("   ", SplitPattern::kLlama3), (Pieces{"   "}));
}

TEST(SplitPatternTest, LettersOfEveryScriptAndOtherNumbersAreClassified) {
  EXPECT_EQ(pieces("\xE6\x97\xA5\xE6\x9C\xAC"
                   "123 \xD0\x81\xD0\xBB\xD0\xBA\xD0\xB0",
                   SplitPattern::kLlama3),
            (Pieces{"\xE6\x97\xA5\xE6\x9C\xAC", "123", " \xD0\x81\xD0\xBB\xD0\xBA\xD0\xB0"}));
  // ½ (No) and ٣ (Arabic-Indic three, Nd) are numbers; € is neither letter nor number.
  EXPECT_EQ(pieces("\xC2\xBD\xD9\xA3 \xE2\x82\xAC"
                   "5",
                   SplitPattern::kGpt2),
            (Pieces{"\xC2\xBD\xD9\xA3", " \xE2\x82\xAC", "5"}));
}

TEST(SplitPatternTest, PiecesCoverTheWholeText) {
  const std::string text = testing::multilingual_sample();
  for (const SplitPattern pattern : {SplitPattern::kGpt2, SplitPattern::kLlama3, SplitPattern::kQwen2}) {
    std::string joined;
    std::size_t count = 0;
    for (const std::string_view piece : split_with_pattern(text, pattern)) {
      EXPECT_FALSE(piece.empty());
      joined += piece;
      ++count;
    }
    EXPECT_EQ(joined, text) << to_string(pattern);
    EXPECT_GT(count, 500u) << to_string(pattern);
  }
  EXPECT_TRUE(split_with_pattern("", SplitPattern::kGpt2).empty());
}

TEST(SplitPatternTest, PatternTextsAreRecognisedExactly) {
  EXPECT_EQ(find_split_pattern(testing::kLlama3Pattern), SplitPattern::kLlama3);
  EXPECT_EQ(find_split_pattern(testing::kQwen2Pattern), SplitPattern::kQwen2);
  EXPECT_EQ(find_split_pattern(R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)"),
            SplitPattern::kGpt2);
  EXPECT_EQ(find_split_pattern(R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+)"), std::nullopt);
  const std::string supported = supported_split_patterns();
  EXPECT_NE(supported.find("gpt2: 's|'t"), std::string::npos);
  EXPECT_NE(supported.find("llama3: (?i:"), std::string::npos);
  EXPECT_NE(supported.find("qwen2: (?i:"), std::string::npos);
}

}  // namespace
}  // namespace graphed::tokenizer
