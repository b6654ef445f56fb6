// tests/tokenizer/bpe_model_test.cpp — BpeModel: merges apply lowest rank first (ties leftmost),
// ignore_merges, byte fallback to <0xXX> tokens, unknown tokens (fused or not, or dropped without an
// unk_token), long words, and the load-time check of every merge.
#include "graphed/tokenizer/bpe_model.h"

#include <gtest/gtest.h>

#include "error_text.h"

namespace graphed::tokenizer {
namespace {

using graphed::testing::error_text;
using Ids = std::vector<int64_t>;

std::unordered_map<std::string, int64_t> letters_vocabulary() {
  return {{"a", 0}, {"b", 1}, {"c", 2}, {"ab", 3}, {"bc", 4}, {"abc", 5}, {"aa", 6}, {"aaaa", 7}};
}

Ids encode(const BpeModel& model, const std::string& word) {
  Ids ids;
  model.encode_word(word, ids);
  return ids;
}

TEST(BpeModelTest, LowestRankMergesFirst) {
  const BpeModel bc_first(letters_vocabulary(), {{"b", "c"}, {"a", "b"}}, {}, "test");
  EXPECT_EQ(encode(bc_first, "abc"), (Ids{0, 4}));  // "a" "bc": (a, bc) is no merge
  const BpeModel ab_first(letters_vocabulary(), {{"a", "b"}, {"b", "c"}, {"ab", "c"}}, {}, "test");
  EXPECT_EQ(encode(ab_first, "abc"), (Ids{5}));
  EXPECT_EQ(encode(ab_first, "cab"), (Ids{2, 3}));
  EXPECT_TRUE(encode(ab_first, "").empty());
}

TEST(BpeModelTest, RepeatedPairsMergeLeftToRightAndLongWordsStayFast) {
  const BpeModel model(letters_vocabulary(), {{"a", "a"}, {"aa", "aa"}}, {}, "test");
  EXPECT_EQ(encode(model, "aaaaa"), (Ids{7, 0}));
  EXPECT_EQ(encode(model, "aaa"), (Ids{6, 0}));
  const Ids long_word = encode(model, std::string(200001, 'a'));  // one word, as without a pre-tokenizer
  ASSERT_EQ(long_word.size(), 50001u);
  EXPECT_EQ(long_word.front(), 7);
  EXPECT_EQ(long_word.back(), 0);
}

TEST(BpeModelTest, IgnoreMergesTakesAWholeVocabularyWordAsOneToken) {
  std::unordered_map<std::string, int64_t> vocabulary = letters_vocabulary();
  vocabulary["cab"] = 8;  // no merge builds it
  const BpeModel merging(vocabulary, {{"a", "b"}}, {}, "test");
  EXPECT_EQ(encode(merging, "cab"), (Ids{2, 3}));
  BpeModelOptions options;
  options.ignore_merges = true;
  const BpeModel ignoring(vocabulary, {{"a", "b"}}, options, "test");
  EXPECT_EQ(encode(ignoring, "cab"), (Ids{8}));
  EXPECT_EQ(encode(ignoring, "cabc"), (Ids{2, 3, 2}));  // not in the vocabulary: merges as usual
}

TEST(BpeModelTest, ByteFallbackSpellsUnknownCharactersAsByteTokens) {
  std::unordered_map<std::string, int64_t> vocabulary = {
      {"<unk>", 0}, {"a", 1}, {"<0xE2>", 2}, {"<0x82>", 3}, {"<0xAC>", 4}};
  BpeModelOptions options;
  options.byte_fallback = true;
  options.unknown_token = "<unk>";
  const BpeModel model(vocabulary, {}, options, "test");
  EXPECT_EQ(encode(model,
                   "a\xE2\x82\xAC"
                   "a"),
            (Ids{1, 2, 3, 4, 1}));                     // € = E2 82 AC
  EXPECT_EQ(encode(model, "a\xC3\xA9"), (Ids{1, 0}));  // é: C3 has no byte token -> <unk>
}

TEST(BpeModelTest, UnknownCharactersFuseOrNotOrAreDropped) {
  const std::unordered_map<std::string, int64_t> vocabulary = {{"<unk>", 0}, {"a", 1}};
  BpeModelOptions options;
  options.unknown_token = "<unk>";
  const BpeModel separate(vocabulary, {}, options, "test");
  EXPECT_EQ(encode(separate, "axya"), (Ids{1, 0, 0, 1}));
  options.fuse_unknown = true;
  const BpeModel fused(vocabulary, {}, options, "test");
  EXPECT_EQ(encode(fused, "axya"), (Ids{1, 0, 1}));
  const BpeModel dropping(vocabulary, {}, {}, "test");
  EXPECT_EQ(encode(dropping, "axya"), (Ids{1, 1}));  // no unk_token: HF tokenizers drops them
}

TEST(BpeModelTest, EveryMergeIsCheckedAgainstTheVocabulary) {
  EXPECT_EQ(error_text<DataError>([] {
              BpeModel(letters_vocabulary(), {{"a", "b"}, {"b", "x"}}, {}, "'t.json' model");
            }),
            "'t.json' model: merge 1 \"b x\": its right part is not in the vocabulary; fix: use the merges file that "
            "belongs to this vocabulary");
  EXPECT_EQ(error_text<DataError>([] {
              BpeModel(letters_vocabulary(), {{"c", "a"}}, {}, "merges.txt");
            }),
            "merges.txt: merge 0 \"c a\": the merged token is not in the vocabulary; fix: use the merges file that "
            "belongs to this vocabulary");
  BpeModelOptions options;
  options.unknown_token = "<unk>";
  EXPECT_EQ(error_text<DataError>([&] { BpeModel(letters_vocabulary(), {}, options, "'t.json' model"); }),
            "'t.json' model: the unknown token \"<unk>\" (unk_token) is not in the vocabulary; fix: set unk_token to a "
            "vocabulary entry or null");
}

}  // namespace
}  // namespace graphed::tokenizer
