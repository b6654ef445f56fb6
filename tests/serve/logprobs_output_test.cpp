// tests/serve/logprobs_output_test.cpp — log probabilities in OpenAI's shapes: a completion's tokens, token_logprobs,
// top_logprobs (with the drawn token, one entry per text) and text_offset (continuing across a stream's chunks); a
// chat's content entries with their bytes; and what each request kind gives its handler.
#include "graphed/serve/logprobs_output.h"

#include <gtest/gtest.h>

#include <limits>

#include "graphed/serve/request_kind.h"

namespace graphed::serve {
namespace {

using json = nlohmann::ordered_json;

/// Ids 0 "Hello", 1 " wor", 2 "ld", 3 "é" as two byte-level halves (ids 3 and 4), 5 another " wor".
VocabularyTable logprob_table() {
  return VocabularyTable({"Hello", " wor", "ld", "\xEF\xBF\xBD", "\xEF\xBF\xBD", " wor"},
                         {"Hello", " wor", "ld", "\xC3", "\xA9", " wor"}, {true, true, true, true, true, true});
}

std::vector<TokenLogprob> drawn() {
  return {{0, -0.5, {{0, -0.5}, {1, -1.5}}}, {1, -2.0, {{2, -0.25}, {5, -1.0}, {1, -2.0}}}};
}

TEST(LogprobsOutputTest, ACompletionListsTokensAlternativesAndOffsets) {
  const VocabularyTable table = logprob_table();
  int64_t offset = 0;
  const json logprobs = completion_logprobs(drawn(), table, offset);
  EXPECT_EQ(logprobs["tokens"], json::parse(R"(["Hello", " wor"])"));
  EXPECT_EQ(logprobs["token_logprobs"], json::parse("[-0.5, -2.0]"));
  // One entry per text (ids 5 and 1 read alike: the likelier kept), the drawn token among them.
  EXPECT_EQ(logprobs["top_logprobs"], json::parse(R"([{"Hello": -0.5, " wor": -1.5}, {"ld": -0.25, " wor": -1.0}])"));
  EXPECT_EQ(logprobs["text_offset"], json::parse("[0, 5]"));
  EXPECT_EQ(offset, 9);
  // A stream's next chunk goes on from there; with k = 0 the drawn token alone.
  const json next = completion_logprobs({{2, -0.1, {}}}, table, offset);
  EXPECT_EQ(next["text_offset"], json::parse("[9]"));
  EXPECT_EQ(next["top_logprobs"], json::parse(R"([{"ld": -0.1}])"));
  EXPECT_EQ(offset, 11);
}

TEST(LogprobsOutputTest, AChatListsEntriesWithTheirBytes) {
  const VocabularyTable table = logprob_table();
  const json logprobs = chat_logprobs({{3, -1.0, {{3, -1.0}, {0, -3.0}}}, {4, -0.0, {}}}, table);
  const json& first = logprobs["content"][0];
  EXPECT_EQ(first["token"], "\xEF\xBF\xBD");
  EXPECT_EQ(first["logprob"], -1.0);
  EXPECT_EQ(first["bytes"], json::parse("[195]"));  // the raw byte of half a character
  EXPECT_EQ(first["top_logprobs"], json::parse(R"([{"token": "\ufffd", "logprob": -1.0, "bytes": [195]},
                            {"token": "Hello", "logprob": -3.0, "bytes": [72, 101, 108, 108, 111]}])"));
  EXPECT_EQ(logprobs["content"][1]["bytes"], json::parse("[169]"));
  EXPECT_EQ(logprobs["content"][1]["top_logprobs"], json::array());
}

/// JSON has no infinity: a token the model gives no chance is written as -9999, as OpenAI writes it.
TEST(LogprobsOutputTest, AnImpossibleTokenIsMinus9999) {
  const VocabularyTable table = logprob_table();
  const double impossible = -std::numeric_limits<double>::infinity();
  const json logprobs = chat_logprobs({{0, -0.1, {{0, -0.1}, {2, impossible}}}}, table);
  EXPECT_EQ(logprobs["content"][0]["top_logprobs"][1]["logprob"], -9999.0);
}

TEST(LogprobsOutputTest, EachKindGivesItsEndpointsShape) {
  const VocabularyTable table = logprob_table();
  int64_t offset = 3;
  EXPECT_EQ(completion_kind().logprobs(drawn(), table, offset)["text_offset"], json::parse("[3, 8]"));
  EXPECT_EQ(offset, 12);
  EXPECT_EQ(chat_kind().logprobs(drawn(), table, offset)["content"].size(), 2u);
  const json chunk = chat_kind().chunk({"id", "m", 1}, 0, "Hello", std::nullopt, json{{"content", json::array()}});
  EXPECT_EQ(chunk["choices"][0]["logprobs"], json({{"content", json::array()}}));
}

}  // namespace
}  // namespace graphed::serve
