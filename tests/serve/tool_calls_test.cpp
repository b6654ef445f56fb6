// tests/serve/tool_calls_test.cpp — tool calls read out of replies: the format a chat template teaches, Hermes
// blocks and Llama JSON calls whole (one, several, with content before, arguments as an object or a string,
// a missing closing tag), what stays content (unknown tools, broken JSON, prose), and the same replies streamed in
// awkward pieces: content goes out as it comes, a call's start is held back, and what was held is a call or content.
#include "graphed/serve/tool_calls.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace graphed::serve {
namespace {

const std::vector<std::string> kTools{"get_weather", "add"};

TEST(ToolCalls, TheFormatComesFromTheTemplate) {
  EXPECT_EQ(tool_call_format_of("{{- '<tool_call>\\n' }}{{ tool_call.name }}"), ToolCallFormat::kHermes);
  EXPECT_EQ(tool_call_format_of("{{- '<|python_tag|>' + tool_call.name }}"), ToolCallFormat::kLlamaJson);
  EXPECT_EQ(tool_call_format_of("Respond in the format {\"name\": function name, \"parameters\": dictionary}"),
            ToolCallFormat::kLlamaJson);
  EXPECT_EQ(tool_call_format_of("{% for message in messages %}{{ message.content }}{% endfor %}"),
            ToolCallFormat::kNone);
}

TEST(ToolCalls, HermesBlocksAreCallsAndTheTextBeforeThemContent) {
  const std::string text =
      "Let me check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>\n"
      "<tool_call>\n{\"name\": \"add\", \"arguments\": \"{\\\"a\\\": 1, \\\"b\\\": 2}\"}\n</tool_call>";
  const auto reply = parse_tool_calls(text, ToolCallFormat::kHermes, kTools);
  ASSERT_TRUE(reply.has_value());
  EXPECT_EQ(reply->content, std::optional<std::string>("Let me check.\n"));
  ASSERT_EQ(reply->calls.size(), 2u);
  EXPECT_EQ(reply->calls[0].name, "get_weather");
  EXPECT_EQ(reply->calls[0].arguments, "{\"city\":\"Paris\"}");
  EXPECT_EQ(reply->calls[1].name, "add");
  EXPECT_EQ(reply->calls[1].arguments, "{\"a\":1,\"b\":2}");  // arguments sent as a string holding an object
  // A last block whose closing tag never came (the model stopped at its end token); no content before it.
  const auto unclosed =
      parse_tool_calls("<tool_call>{\"name\": \"add\", \"arguments\": {}}", ToolCallFormat::kHermes, kTools);
  ASSERT_TRUE(unclosed.has_value());
  EXPECT_FALSE(unclosed->content.has_value());
  EXPECT_EQ(unclosed->calls.at(0).arguments, "{}");
}

TEST(ToolCalls, WhatDoesNotParseStaysContent) {
  for (const std::string& text : {std::string("Paris is sunny."),
                                  std::string("<tool_call>{\"name\": \"delete_all\", \"arguments\": {}}</tool_call>"),
                                  std::string("<tool_call>{\"name\": \"add\", \"arguments\": [1, 2]}</tool_call>"),
                                  std::string("<tool_call>{\"name\": \"add\", \"arguments\": {</tool_call>"),
                                  std::string("<tool_call><tool_call>{\"name\": \"add\"}</tool_call>")}) {
    EXPECT_FALSE(parse_tool_calls(text, ToolCallFormat::kHermes, kTools).has_value()) << text;
  }
  EXPECT_FALSE(parse_tool_calls("<tool_call>{\"name\": \"add\"}</tool_call>", ToolCallFormat::kNone, kTools));
}

TEST(ToolCalls, LlamaCallsAreTheWholeReply) {
  const auto one = parse_tool_calls("<|python_tag|>{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Oslo\"}}",
                                    ToolCallFormat::kLlamaJson, kTools);
  ASSERT_TRUE(one.has_value());
  EXPECT_FALSE(one->content.has_value());
  ASSERT_EQ(one->calls.size(), 1u);
  EXPECT_EQ(one->calls[0].arguments, "{\"city\":\"Oslo\"}");
  const auto two = parse_tool_calls(
      "  {\"name\": \"add\", \"parameters\": {\"a\": \"}\"}}; {\"name\": \"get_weather\", \"arguments\": {}}\n",
      ToolCallFormat::kLlamaJson, kTools);
  ASSERT_TRUE(two.has_value());
  ASSERT_EQ(two->calls.size(), 2u);
  EXPECT_EQ(two->calls[0].arguments, "{\"a\":\"}\"}");  // a brace inside a string does not end the object
  EXPECT_EQ(two->calls[1].name, "get_weather");
  for (const std::string& text : {std::string("The answer is {\"name\": \"add\"}"),
                                  std::string("{\"name\": \"add\", \"parameters\": {}} and more"),
                                  std::string("{\"name\": \"add\", \"parameters\": {}"), std::string("   ")}) {
    EXPECT_FALSE(parse_tool_calls(text, ToolCallFormat::kLlamaJson, kTools).has_value()) << text;
  }
}

/// Streams `pieces` through a ToolCallStream: the content sent as it came, and the end.
struct Streamed {
  std::string content;
  std::optional<ToolCallReply> calls;
};

Streamed stream(ToolCallFormat format, const std::vector<std::string>& pieces) {
  ToolCallStream reply(format, kTools);
  Streamed result;
  for (const auto& piece : pieces) result.content += reply.feed(piece);
  result.calls = reply.finish();
  if (!result.calls) result.content += reply.held();
  return result;
}

TEST(ToolCalls, AStreamSendsContentAsItComesAndHoldsBackACall) {
  ToolCallStream hermes(ToolCallFormat::kHermes, kTools);
  EXPECT_EQ(hermes.feed("Checking"), "Checking");
  EXPECT_EQ(hermes.feed(" now <tool"), " now ");  // "<tool" may be a call's start: held
  EXPECT_EQ(hermes.feed("_call>{\"name\": \"add\", "), "");
  EXPECT_EQ(hermes.feed("\"arguments\": {\"a\": 2}}</tool_call>"), "");
  const auto reply = hermes.finish();
  ASSERT_TRUE(reply.has_value());
  EXPECT_EQ(reply->content, std::optional<std::string>("Checking now "));
  ASSERT_EQ(reply->calls.size(), 1u);
  EXPECT_EQ(reply->calls[0].arguments, "{\"a\":2}");

  // Held back but not a call after all: the held text is content.
  const Streamed almost = stream(ToolCallFormat::kHermes, {"a <tool", "box> b <tool_c"});
  EXPECT_FALSE(almost.calls.has_value());
  EXPECT_EQ(almost.content, "a <toolbox> b <tool_c");
  const Streamed broken = stream(ToolCallFormat::kHermes, {"<tool_call>{\"name\": \"nope\"}"});
  EXPECT_FALSE(broken.calls.has_value());
  EXPECT_EQ(broken.content, "<tool_call>{\"name\": \"nope\"}");
}

TEST(ToolCalls, ALlamaStreamHoldsAReplyThatBeginsLikeACall) {
  const Streamed call =
      stream(ToolCallFormat::kLlamaJson, {" ", "<|python", "_tag|>{\"name\": \"add\",", " \"parameters\": {}}"});
  ASSERT_TRUE(call.calls.has_value());
  EXPECT_EQ(call.content, "");
  EXPECT_EQ(call.calls->calls.at(0).name, "add");
  ToolCallStream prose(ToolCallFormat::kLlamaJson, kTools);
  EXPECT_EQ(prose.feed("  "), "");  // whitespace alone may still begin a call
  EXPECT_EQ(prose.feed("Hello"), "  Hello");
  EXPECT_EQ(prose.feed(" {\"name\": \"add\"}"), " {\"name\": \"add\"}");  // after content, braces are content
  EXPECT_FALSE(prose.finish().has_value());
  EXPECT_EQ(prose.held(), "");
  const Streamed not_a_call = stream(ToolCallFormat::kLlamaJson, {"{\"json\": ", "true}"});
  EXPECT_FALSE(not_a_call.calls.has_value());
  EXPECT_EQ(not_a_call.content, "{\"json\": true}");
}

TEST(ToolCalls, WithoutAFormatEverythingIsContentAtOnce) {
  ToolCallStream plain(ToolCallFormat::kNone, kTools);
  EXPECT_EQ(plain.feed("<tool_call>{"), "<tool_call>{");
  EXPECT_FALSE(plain.finish().has_value());
  EXPECT_EQ(plain.held(), "");
}

}  // namespace
}  // namespace graphed::serve
