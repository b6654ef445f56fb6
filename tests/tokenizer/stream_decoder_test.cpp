// tests/tokenizer/stream_decoder_test.cpp — StreamDecoder never returns part of a character: bytes of
// one character spread over several tokens come out together; the pieces add up to decode(ids);
// Llama-2's leading-space rule holds; finish() flushes what was held back.
#include "graphed/tokenizer/stream_decoder.h"

#include <gtest/gtest.h>

#include "error_text.h"
#include "tokenizer_fixtures.h"

namespace graphed::tokenizer {
namespace {

using graphed::testing::error_text;
using namespace graphed::tokenizer::testing;  // NOLINT: fixtures

/// The text each push returned, in order.
std::vector<std::string> stream(const Tokenizer& tokenizer, const std::vector<int64_t>& ids,
                                bool skip_special_tokens = false) {
  StreamDecoder decoder(tokenizer, skip_special_tokens);
  std::vector<std::string> pieces;
  for (const int64_t id : ids) pieces.push_back(decoder.push(id));
  pieces.push_back(decoder.finish());
  return pieces;
}

TEST(StreamDecoderTest, ByteTokensOfOneCharacterComeOutTogether) {
  const auto tokenizer = load_tokenizer("bytes");
  const std::string text = "h\xC3\xA9 \xF0\x9F\x98\x80!";  // é is 2 bytes, 😀 4
  const std::vector<std::string> pieces = stream(*tokenizer, tokenizer->encode(text));
  EXPECT_EQ(pieces, (std::vector<std::string>{"h", "", "\xC3\xA9", " ", "", "", "", "\xF0\x9F\x98\x80", "!", ""}));
}

TEST(StreamDecoderTest, PiecesAddUpToTheDecodedTextAndAreValidUtf8) {
  TemporaryFolder folder;
  const auto tokenizer = load_document(folder, llama3_document(ByteLevelVocabulary(word_merges())));
  const std::string sample = multilingual_sample();
  const std::vector<int64_t> ids = tokenizer->encode(sample);
  std::string joined;
  for (const std::string& piece : stream(*tokenizer, ids, true)) {
    EXPECT_EQ(find_invalid_utf8(piece), piece.size());
    EXPECT_EQ(piece.find(kReplacementCharacter), std::string::npos);
    joined += piece;
  }
  EXPECT_EQ(joined, sample);
}

TEST(StreamDecoderTest, Llama2KeepsSpacesBetweenWordsButNotBeforeTheFirst) {
  TemporaryFolder folder;
  const auto tokenizer = load_document(folder, llama2_document());
  const std::vector<int64_t> ids = tokenizer->encode("hello world \xE2\x82\xAC");
  const std::vector<std::string> pieces = stream(*tokenizer, ids, true);
  EXPECT_EQ(pieces, (std::vector<std::string>{"", "hello", " w", "or", "l", "d", " ", "", "", "\xE2\x82\xAC", ""}));
}

TEST(StreamDecoderTest, FinishFlushesAnIncompleteCharacterAndBadIdsChangeNothing) {
  const auto tokenizer = load_tokenizer("bytes");
  StreamDecoder decoder(*tokenizer);
  EXPECT_EQ(decoder.push('a'), "a");
  EXPECT_EQ(decoder.push(0xE2), "");
  EXPECT_EQ(error_text<DataError>([&] { decoder.push(300); }),
            "token id 300 is outside the vocabulary (256 ids: 0..255); fix: pass ids this tokenizer produced");
  EXPECT_EQ(decoder.push(0x82), "");
  EXPECT_EQ(decoder.finish(), "\xEF\xBF\xBD");
  EXPECT_EQ(decoder.push('b'), "b");  // starts afresh
}

}  // namespace
}  // namespace graphed::tokenizer
