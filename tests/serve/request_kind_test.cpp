// tests/serve/request_kind_test.cpp — what each request kind gives the shared generation path: the id
// prefix, the prompt's field, the default max_tokens, and the shapes of its bodies and stream chunks.
#include <gtest/gtest.h>

#include "graphed/serve/request_kind.h"

namespace graphed::serve {
namespace {

using json = nlohmann::ordered_json;

ResponseHeader header() { return {"id-1", "m", 5}; }

TEST(RequestKindTest, CompletionNamesItsPromptAndIds) {
  const RequestKind& kind = completion_kind();
  EXPECT_EQ(kind.id_prefix(), "cmpl-");
  EXPECT_EQ(kind.prompt_param(), "prompt");
  EXPECT_EQ(kind.chunk_object(), "text_completion");
}

TEST(RequestKindTest, ChatNamesItsPromptAndIds) {
  const RequestKind& kind = chat_kind();
  EXPECT_EQ(kind.id_prefix(), "chatcmpl-");
  EXPECT_EQ(kind.prompt_param(), "messages");
  EXPECT_EQ(kind.chunk_object(), "chat.completion.chunk");
}

/// OpenAI's defaults: 16 tokens for a completion; a chat takes what the context leaves, at least one.
TEST(RequestKindTest, DefaultMaxTokensAreOpenAis) {
  EXPECT_EQ(completion_kind().default_max_tokens(10, 100), 16);
  EXPECT_EQ(chat_kind().default_max_tokens(10, 100), 90);
  EXPECT_EQ(chat_kind().default_max_tokens(100, 100), 1);
}

TEST(RequestKindTest, CompletionBodyHasEveryChoice) {
  const json body = completion_kind().body(header(), {{"a", "stop"}, {"b", "length"}}, Usage{4, 3});
  EXPECT_EQ(body["object"], "text_completion");
  ASSERT_EQ(body["choices"].size(), 2u);
  EXPECT_EQ(body["choices"][1]["text"], "b");
  EXPECT_EQ(body["choices"][1]["finish_reason"], "length");
}

TEST(RequestKindTest, ChatBodyIsTheAssistantsMessage) {
  const json body = chat_kind().body(header(), {{"hi", "stop"}}, Usage{1, 1});
  EXPECT_EQ(body["object"], "chat.completion");
  EXPECT_EQ(body["choices"][0]["message"], (json{{"role", "assistant"}, {"content", "hi"}}));
  EXPECT_EQ(body["choices"][0]["finish_reason"], "stop");
}

/// A chat stream opens with the assistant's role; a completion stream opens with its first text.
TEST(RequestKindTest, OnlyAChatStreamOpensWithTheRole) {
  EXPECT_TRUE(completion_kind().opening_chunks(header(), 0).empty());
  const std::vector<json> opening = chat_kind().opening_chunks(header(), 0);
  ASSERT_EQ(opening.size(), 1u);
  EXPECT_EQ(chat_kind().opening_chunks(header(), 2)[0]["choices"][0]["index"], 2);  // each of n choices opens so
  EXPECT_EQ(opening[0]["choices"][0]["delta"], (json{{"role", "assistant"}, {"content", ""}}));
  EXPECT_TRUE(opening[0]["choices"][0]["finish_reason"].is_null());
}

TEST(RequestKindTest, ChunksCarryTheTextThenTheEnd) {
  const json text = completion_kind().chunk(header(), 2, "t", std::nullopt);
  EXPECT_EQ(text["choices"][0]["index"], 2);
  EXPECT_EQ(text["choices"][0]["text"], "t");
  EXPECT_TRUE(text["choices"][0]["finish_reason"].is_null());
  const json piece = chat_kind().chunk(header(), 0, "h", std::nullopt);
  EXPECT_EQ(piece["object"], "chat.completion.chunk");
  EXPECT_EQ(piece["choices"][0]["delta"], (json{{"content", "h"}}));
  const json end = chat_kind().chunk(header(), 0, "", std::string("stop"));
  EXPECT_EQ(end["choices"][0]["delta"], json::object());
  EXPECT_EQ(end["choices"][0]["finish_reason"], "stop");
}

}  // namespace
}  // namespace graphed::serve
