// tests/serve/text_pieces_test.cpp — a request's tokens as the text pieces a client is sent, through graphed's byte
// tokenizer (id = byte): complete characters only, stop strings cut, and each token's log probabilities with the
// piece that carries the end of its text (dropped with text a stop string cuts).
#include "graphed/serve/text_pieces.h"

#include <gtest/gtest.h>

#include <memory>

namespace graphed::serve {
namespace {

const tokenizer::Tokenizer& byte_tokenizer() {
  static const std::unique_ptr<tokenizer::Tokenizer> tokenizer = tokenizer::load_tokenizer("bytes");
  return *tokenizer;
}

/// The log probability entry of a byte, its logprob telling it apart.
TokenLogprob byte_entry(char byte) {
  return {static_cast<unsigned char>(byte), -static_cast<double>(static_cast<unsigned char>(byte)), {}};
}

std::vector<int64_t> tokens_of(const std::vector<TokenLogprob>& entries) {
  std::vector<int64_t> tokens;
  for (const TokenLogprob& one : entries) tokens.push_back(one.token);
  return tokens;
}

TEST(TextPiecesTest, ACharacterSplitOverTokensComesWithBothEntries) {
  TextPieces pieces(byte_tokenizer(), {});
  TextPieces::Piece first = pieces.push(0xC3, byte_entry('\xC3'));
  EXPECT_EQ(first.text, "");
  EXPECT_TRUE(first.logprobs.empty());
  TextPieces::Piece second = pieces.push(0xA9, byte_entry('\xA9'));
  EXPECT_EQ(second.text, "\xC3\xA9");
  EXPECT_EQ(tokens_of(second.logprobs), (std::vector<int64_t>{0xC3, 0xA9}));
  EXPECT_EQ(tokens_of(pieces.push('a', byte_entry('a')).logprobs), std::vector<int64_t>{'a'});
}

TEST(TextPiecesTest, AStopStringCutsTheTokensOfItsText) {
  TextPieces pieces(byte_tokenizer(), {"ab"});
  EXPECT_EQ(tokens_of(pieces.push('x', byte_entry('x')).logprobs), std::vector<int64_t>{'x'});
  const TextPieces::Piece held = pieces.push('a', byte_entry('a'));  // may start "ab": held back with its entry
  EXPECT_EQ(held.text, "");
  EXPECT_TRUE(held.logprobs.empty());
  const TextPieces::Piece released = pieces.push('c', byte_entry('c'));
  EXPECT_EQ(released.text, "ac");
  EXPECT_EQ(tokens_of(released.logprobs), (std::vector<int64_t>{'a', 'c'}));
  EXPECT_TRUE(pieces.push('a', byte_entry('a')).logprobs.empty());
  const TextPieces::Piece stopped = pieces.push('b', byte_entry('b'));
  EXPECT_TRUE(stopped.stopped);
  EXPECT_EQ(stopped.text, "");
  EXPECT_TRUE(stopped.logprobs.empty());  // "a" and "b" were the stop string's
  const TextPieces::Piece after = pieces.push('z', byte_entry('z'));
  EXPECT_TRUE(after.stopped);
  EXPECT_TRUE(after.logprobs.empty());
  EXPECT_TRUE(pieces.finish().logprobs.empty());
}

TEST(TextPiecesTest, TheLastPieceCarriesWhatWasHeld) {
  TextPieces pieces(byte_tokenizer(), {"zz"});
  EXPECT_EQ(pieces.push('q', byte_entry('q')).text, "q");
  EXPECT_EQ(pieces.push('z', byte_entry('z')).text, "");
  EXPECT_EQ(pieces.push(0xE2, byte_entry('\xE2')).text, "");  // half a character adds no text: "z" still may start "zz"
  const TextPieces::Piece last = pieces.finish();
  EXPECT_EQ(last.text, "z\xEF\xBF\xBD");  // the held "z", and the incomplete character as U+FFFD
  EXPECT_EQ(tokens_of(last.logprobs), (std::vector<int64_t>{'z', 0xE2}));
}

TEST(TextPiecesTest, WithoutLogprobsPiecesCarryNone) {
  TextPieces pieces(byte_tokenizer(), {});
  const TextPieces::Piece piece = pieces.push('h', std::nullopt);
  EXPECT_EQ(piece.text, "h");
  EXPECT_TRUE(piece.logprobs.empty());
  EXPECT_TRUE(pieces.finish().logprobs.empty());
}

}  // namespace
}  // namespace graphed::serve
