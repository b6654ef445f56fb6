// tests/serve/tool_call_grammar_test.cpp — the grammar of a reply that must call tools: seeded random walks over a
// small vocabulary under it always read back through parse_tool_calls() as calls of the allowed functions whose
// arguments satisfy their schemas (a $ref inside a tool's parameters included), one call or several as asked, in
// the Hermes and Llama formats; and the refusals of what cannot be generated.
#include "graphed/serve/tool_call_grammar.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "graphed/serve/api_error.h"

namespace graphed::serve {
namespace {

using json = nlohmann::ordered_json;

/// Every byte, some JSON and tag pieces, then the end token (special).
std::shared_ptr<const VocabularyTable> tool_walk_vocabulary() {
  std::vector<std::string> texts;
  for (int byte = 0; byte < 256; ++byte) texts.emplace_back(1, static_cast<char>(byte));
  for (const char* piece : {"<tool_call>", "\n", "</tool_call>", "{\"name\":\"", "get_weather", "add", "\",\"",
                            "arguments", "parameters", "\":{", "}}", "Paris", "Rome", "12", "-3", "\":\"", "\"}"}) {
    texts.emplace_back(piece);
  }
  std::vector<std::string> bytes = texts;
  std::vector<bool> usable(texts.size(), true);
  texts.emplace_back("<|end|>");
  bytes.emplace_back("<|end|>");
  usable.push_back(false);
  return std::make_shared<const VocabularyTable>(std::move(texts), std::move(bytes), std::move(usable));
}

const json& weather_and_add_tools() {
  static const json tools = json::parse(R"([
    {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object",
      "properties": {"city": {"enum": ["Paris", "Rome"]}, "unit": {"$ref": "#/$defs/unit"}}, "required": ["city"],
      "$defs": {"unit": {"enum": ["c", "f"]}}}}},
    {"type": "function", "function": {"name": "add", "parameters": {"type": "object",
      "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}, "required": ["a", "b"],
      "additionalProperties": false}}},
    {"type": "function", "function": {"name": "now"}}])");
  return tools;
}

/// A reply drawn uniformly among the allowed ids until the end token or the grammar's end.
std::string draw_reply(std::shared_ptr<CompiledGrammar> compiled, std::mt19937& random) {
  static const auto table = tool_walk_vocabulary();
  static const auto trie = std::make_shared<const grammar::TokenTrie>(table->grammar_bytes());
  const int64_t end = table->size() - 1;
  GrammarConstraint constraint(std::move(compiled), table, trie, {end});
  std::vector<std::uint32_t> words(grammar::bitmask_words(static_cast<int32_t>(table->size())));
  std::string text;
  for (int step = 0; step < 2000 && !constraint.finished(); ++step) {
    constraint.allowed(words.data(), static_cast<int64_t>(words.size()));
    std::vector<int64_t> allowed;
    for (int64_t id = 0; id < table->size(); ++id) {
      if ((words[static_cast<std::size_t>(id / 32)] >> (id % 32)) & 1u) allowed.push_back(id);
    }
    EXPECT_FALSE(allowed.empty()) << text;
    if (allowed.empty()) break;
    const int64_t token = allowed[std::uniform_int_distribution<std::size_t>(0, allowed.size() - 1)(random)];
    if (token == end) break;
    constraint.accept(token);
    text += table->bytes(token);
  }
  return text;
}

/// Whether a call's arguments satisfy its function's parameters.
bool arguments_fit(const ToolCall& call) {
  const json arguments = json::parse(call.arguments);
  if (call.name == "now") return arguments == json::object();
  if (call.name == "add") {
    return arguments.size() == 2 && arguments.contains("a") && arguments.contains("b") && arguments["a"].is_number() &&
           arguments["b"].is_number();
  }
  if (call.name != "get_weather" || !arguments.contains("city")) return false;
  for (const auto& [key, value] : arguments.items()) {
    if (key == "city" && value != "Paris" && value != "Rome") return false;
    if (key == "unit" && value != "c" && value != "f") return false;
    if (key != "city" && key != "unit") return false;
  }
  return true;
}

void expect_calls(ToolCallFormat format, const std::vector<std::string>& functions, bool several) {
  const auto compiled = tool_call_grammar(weather_and_add_tools(), functions, format, several);
  EXPECT_EQ(compiled->source, "tool_calls");
  std::size_t most = 0;
  for (int seed = 0; seed < 40; ++seed) {
    std::mt19937 random(static_cast<unsigned>(seed));
    const std::string reply = draw_reply(compiled, random);
    SCOPED_TRACE(reply);
    const auto calls = parse_tool_calls(reply, format, functions);
    ASSERT_TRUE(calls.has_value());
    EXPECT_FALSE(calls->content.has_value());
    ASSERT_FALSE(calls->calls.empty());
    if (!several) EXPECT_EQ(calls->calls.size(), 1u);
    most = std::max(most, calls->calls.size());
    for (const ToolCall& call : calls->calls) {
      EXPECT_NE(std::find(functions.begin(), functions.end(), call.name), functions.end()) << call.name;
      EXPECT_TRUE(arguments_fit(call)) << call.name << " " << call.arguments;
    }
  }
  if (several) EXPECT_GT(most, 1u);  // some of 40 walks go on past the first call
}

TEST(ToolCallGrammarTest, HermesRepliesAreCallsOfTheAllowedFunctions) {
  expect_calls(ToolCallFormat::kHermes, {"get_weather", "add", "now"}, /*several=*/false);
  expect_calls(ToolCallFormat::kHermes, {"get_weather", "add", "now"}, /*several=*/true);
  expect_calls(ToolCallFormat::kHermes, {"add"}, /*several=*/false);  // a named function
}

TEST(ToolCallGrammarTest, LlamaRepliesAreCallsOfTheAllowedFunctions) {
  expect_calls(ToolCallFormat::kLlamaJson, {"get_weather", "add", "now"}, /*several=*/false);
  expect_calls(ToolCallFormat::kLlamaJson, {"get_weather", "now"}, /*several=*/true);
}

std::string tool_grammar_error(const json& tools, ToolCallFormat format) {
  try {
    tool_call_grammar(tools, {"f"}, format, false);
  } catch (const ApiError& error) {
    return std::to_string(error.status()) + " " + error.param() + ": " + error.what();
  }
  return "no error";
}

TEST(ToolCallGrammarTest, RefusesWhatCannotBeGenerated) {
  const auto with_parameters = [](const char* parameters) {
    return json::array(
        {{{"type", "function"}, {"function", {{"name", "f"}, {"parameters", json::parse(parameters)}}}}});
  };
  const json plain = with_parameters(R"({"type": "object", "properties": {}})");
  EXPECT_EQ(tool_grammar_error(plain, ToolCallFormat::kHermes), "no error");
  EXPECT_EQ(tool_grammar_error(plain, ToolCallFormat::kNone),
            "400 tool_choice: 'tool_choice' asks for a call, but the model's chat template teaches no tool-call format "
            "graphed writes (Hermes <tool_call> blocks or Llama 3.x JSON calls); send tool_choice \"auto\" or "
            "\"none\"");
  const std::string pattern = tool_grammar_error(
      with_parameters(R"({"type": "object", "properties": {"x": {"type": "string", "pattern": "\\bx"}}})"),
      ToolCallFormat::kHermes);
  EXPECT_EQ(pattern.rfind("400 tools[0].function.parameters: 'tools[0].function.parameters' (function 'f'), which a "
                          "call must follow: the schema uses keywords graphed does not support: 'pattern' at "
                          "/properties/x: the regular expression '\\bx' has the word boundary",
                          0),
            0u)
      << pattern;
  EXPECT_EQ(tool_grammar_error(with_parameters(R"({"type": "string"})"), ToolCallFormat::kHermes),
            "400 tools[0].function.parameters: 'tools[0].function.parameters' has type \"string\"; a function's "
            "arguments are an object; send an object schema ({\"type\": \"object\", \"properties\": {...}})");
}

}  // namespace
}  // namespace graphed::serve
