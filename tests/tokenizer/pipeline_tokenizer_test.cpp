// tests/tokenizer/pipeline_tokenizer_test.cpp — tokenizer.json pipelines end to end on hand-made
// fixtures: GPT-2 (ByteLevel with the GPT-2 pattern), Llama-3 (Split + ByteLevel, ignore_merges, BOS
// template, special tokens), Qwen2 (NFC + single digits), Llama-2 (Prepend/Replace normalizer, byte
// fallback, Strip decoder) and its Metaspace variant; round trips and the errors of encode/decode.
#include "graphed/tokenizer/pipeline_tokenizer.h"

#include <gtest/gtest.h>

#include "error_text.h"
#include "tokenizer_fixtures.h"

namespace graphed::tokenizer {
namespace {

using graphed::testing::error_text;
using namespace graphed::tokenizer::testing;  // NOLINT: fixtures
using Ids = std::vector<int64_t>;

/// The vocabulary entries of the ids, in plain text (byte-level decoded where possible).
std::vector<std::string> plain_tokens(const Tokenizer& tokenizer, const Ids& ids) {
  std::vector<std::string> result;
  for (const int64_t id : ids) {
    const std::string entry = tokenizer.token_text(id);
    result.push_back(from_byte_level(entry).value_or(entry));
  }
  return result;
}

using Tokens = std::vector<std::string>;
const std::string kMixed = "I'm 12345 h\xC3\xA9llo\n\n  world";

TEST(PipelineTokenizerTest, Gpt2SplitsWithTheGpt2PatternThenMerges) {
  TemporaryFolder folder;
  const auto tokenizer = load_document(folder, gpt2_document(ByteLevelVocabulary(word_merges())));
  const Ids ids = tokenizer->encode(kMixed);
  EXPECT_EQ(plain_tokens(*tokenizer, ids),
            (Tokens{"I", "'m", " ", "12", "3", "4", "5", " h\xC3\xA9llo", "\n", "\n", " ", " world"}));
  EXPECT_EQ(tokenizer->decode(ids), kMixed);
  EXPECT_EQ(tokenizer->vocab_size(), 1001);
  EXPECT_EQ(tokenizer->eos_id(), 1000);
  EXPECT_EQ(tokenizer->bos_id(), std::nullopt);
}

TEST(PipelineTokenizerTest, AddedTokensAreSplitOutBeforePreTokenization) {
  TemporaryFolder folder;
  const auto tokenizer = load_document(folder, gpt2_document(ByteLevelVocabulary(word_merges())));
  const Ids ids = tokenizer->encode("hello<|endoftext|> world");
  EXPECT_EQ(plain_tokens(*tokenizer, ids), (Tokens{"hello", "<|endoftext|>", " world"}));
  EXPECT_EQ(ids[1], 1000);
  EXPECT_EQ(tokenizer->decode(ids), "hello<|endoftext|> world");
  EXPECT_EQ(tokenizer->decode(ids, true), "hello world");
  EXPECT_TRUE(tokenizer->is_special(1000));
  EXPECT_EQ(tokenizer->special_tokens(), (std::map<std::string, int64_t>{{"<|endoftext|>", 1000}}));
}

TEST(PipelineTokenizerTest, ByteLevelAddPrefixSpaceTreatsTheFirstWordLikeTheOthers) {
  TemporaryFolder folder;
  const ByteLevelVocabulary vocabulary(word_merges());
  json document = gpt2_document(vocabulary);
  document["pre_tokenizer"] = byte_level_step(true, true);
  const auto tokenizer = load_document(folder, document);
  EXPECT_EQ(plain_tokens(*tokenizer, tokenizer->encode("world")), (Tokens{" world"}));
  EXPECT_EQ(plain_tokens(*tokenizer, tokenizer->encode(" world")), (Tokens{" world"}));
}

TEST(PipelineTokenizerTest, Llama3SplitsTakesWholeVocabularyWordsAndAddsBos) {
  TemporaryFolder folder;
  ByteLevelVocabulary vocabulary(word_merges());
  vocabulary.vocab[byte_level("123")] = 900;  // reachable by no merge: only ignore_merges finds it
  const auto tokenizer = load_document(folder, llama3_document(vocabulary));
  const Ids ids = tokenizer->encode(kMixed);
  EXPECT_EQ(plain_tokens(*tokenizer, ids),
            (Tokens{"<|begin_of_text|>", "I", "'m", " ", "123", "4", "5", " h\xC3\xA9llo", "\n", "\n", " ", " world"}));
  EXPECT_EQ(ids[0], 1000);
  EXPECT_EQ(ids[4], 900);
  EXPECT_EQ(tokenizer->encode(kMixed, false), Ids(ids.begin() + 1, ids.end()));
  EXPECT_EQ(tokenizer->decode(ids), "<|begin_of_text|>" + kMixed);
  EXPECT_EQ(tokenizer->decode(ids, true), kMixed);
  EXPECT_EQ(tokenizer->bos_id(), 1000);
  EXPECT_EQ(tokenizer->eos_id(), 1001);
  EXPECT_EQ(tokenizer->encode("hello<|end_of_text|>", false).back(), 1001);
}

TEST(PipelineTokenizerTest, Qwen2NormalizesToNfcAndSplitsDigits) {
  TemporaryFolder folder;
  json document = llama3_document(ByteLevelVocabulary(word_merges()), kQwen2Pattern);
  document["normalizer"] = json{{"type", "NFC"}};
  document["post_processor"] = byte_level_step(false, true);
  const auto tokenizer = load_document(folder, document);
  EXPECT_EQ(tokenizer->encode(" he\xCC\x81llo 12"), tokenizer->encode(" h\xC3\xA9llo 12"));
  EXPECT_EQ(plain_tokens(*tokenizer, tokenizer->encode(" he\xCC\x81llo 12")), (Tokens{" h\xC3\xA9llo", " ", "1", "2"}));
  EXPECT_EQ(tokenizer->bos_id(), std::nullopt);
}

TEST(PipelineTokenizerTest, EverySampleRoundTripsThroughEachByteLevelPipeline) {
  TemporaryFolder folder;
  const ByteLevelVocabulary vocabulary(word_merges());
  const std::string sample = multilingual_sample();
  for (const json& document :
       {gpt2_document(vocabulary), llama3_document(vocabulary), llama3_document(vocabulary, kQwen2Pattern)}) {
    const auto tokenizer = load_document(folder, document);
    EXPECT_EQ(tokenizer->decode(tokenizer->encode(sample, false)), sample);
  }
}

TEST(PipelineTokenizerTest, Llama2UsesByteFallbackAndStripsTheLeadingSpace) {
  TemporaryFolder folder;
  const auto tokenizer = load_document(folder, llama2_document());
  const Ids ids = tokenizer->encode("hello world \xE2\x82\xAC");
  EXPECT_EQ(plain_tokens(*tokenizer, ids), (Tokens{"<s>", kMetaspace + "hello", kMetaspace + "w", "or", "l", "d",
                                                   kMetaspace, "<0xE2>", "<0x82>", "<0xAC>"}));
  EXPECT_EQ(tokenizer->decode(ids, true), "hello world \xE2\x82\xAC");
  EXPECT_EQ(tokenizer->decode(tokenizer->encode("h\xC3\xA9", false)), "h\xC3\xA9");
  EXPECT_EQ(tokenizer->decode({3 + 0xE2, 3 + 0x82}), "\xEF\xBF\xBD\xEF\xBF\xBD");  // incomplete: one U+FFFD per byte
  EXPECT_EQ(tokenizer->bos_id(), 1);
  EXPECT_EQ(tokenizer->eos_id(), 2);
  // Each segment between added tokens is normalized on its own (Prepend again after </s>).
  EXPECT_EQ(plain_tokens(*tokenizer, tokenizer->encode("hello</s>hello", false)),
            (Tokens{kMetaspace + "hello", "</s>", kMetaspace + "hello"}));
}

TEST(PipelineTokenizerTest, MetaspacePreTokenizerAndDecoderMatchTheNormalizerForm) {
  TemporaryFolder folder;
  json document = llama2_document();
  document["normalizer"] = nullptr;
  document["pre_tokenizer"] =
      json{{"type", "Metaspace"}, {"replacement", kMetaspace}, {"prepend_scheme", "first"}, {"split", false}};
  document["decoder"] = json{
      {"type", "Sequence"},
      {"decoders", json::array({json{{"type", "Metaspace"}, {"replacement", kMetaspace}, {"prepend_scheme", "first"}},
                                json{{"type", "ByteFallback"}}, json{{"type", "Fuse"}}})}};
  const auto with_metaspace = load_document(folder, document);
  const auto with_normalizer = load_document(folder, llama2_document(), "other.json");
  EXPECT_EQ(with_metaspace->encode("hello world \xE2\x82\xAC"), with_normalizer->encode("hello world \xE2\x82\xAC"));
  // The Metaspace decoder drops the "▁" of the first token only, and that is <s> here.
  EXPECT_EQ(with_metaspace->decode(with_metaspace->encode("hello world")), "<s> hello world");
  EXPECT_EQ(with_metaspace->decode(with_metaspace->encode("hello world"), true), "hello world");
  // prepend_scheme first: no "▁" after an added token at the start of the text.
  EXPECT_EQ(plain_tokens(*with_metaspace, with_metaspace->encode("</s>hello", false)),
            (Tokens{"</s>", "h", "el", "lo"}));
}

TEST(PipelineTokenizerTest, EncodeRefusesInvalidUtf8AndDecodeRefusesUnknownIds) {
  TemporaryFolder folder;
  const auto tokenizer = load_document(folder, llama3_document(ByteLevelVocabulary(word_merges())));
  EXPECT_EQ(error_text<DataError>([&] { tokenizer->encode("hello\xC3(", false); }),
            "the text is not valid UTF-8: byte 0xC3 at byte offset 5; fix: convert the input to UTF-8 (e.g. iconv -f "
            "latin1 -t utf-8)");
  EXPECT_EQ(error_text<DataError>([&] {
              tokenizer->decode({5, 1002});
            }),
            "token id 1002 is outside the vocabulary (1002 ids: 0..1001); fix: pass ids this tokenizer produced");
  EXPECT_EQ(error_text<DataError>([&] { tokenizer->token_text(-1); }),
            "token id -1 is outside the vocabulary (1002 ids: 0..1001); fix: pass ids this tokenizer produced");
  EXPECT_EQ(error_text<DataError>([&] { tokenizer->decode({999}); }),
            "token id 999 has no entry in the vocabulary of '" + folder.path() +
                "/tokenizer.json' (ids are 0..1001 with gaps); fix: pass ids this tokenizer produced");
}

TEST(PipelineTokenizerTest, DescriptionNamesTheStages) {
  TemporaryFolder folder;
  const auto tokenizer = load_document(folder, llama3_document(ByteLevelVocabulary(word_merges())));
  const std::string description = tokenizer->description();
  EXPECT_EQ(description.rfind("byte-level BPE from '", 0), 0u) << description;
  EXPECT_NE(description.find("pre-tokenizer Split(llama3) + ByteLevel;"), std::string::npos) << description;
  EXPECT_NE(description.find("post-processor template <|begin_of_text|> $A"), std::string::npos) << description;
}

}  // namespace
}  // namespace graphed::tokenizer
