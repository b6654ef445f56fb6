// tests/serve/openai_protocol_test.cpp — reading OpenAI request bodies (defaults, every field, and a
// message naming the field for each kind of mistake: sampling controls, log probabilities, response_format,
// tool_choice) and the shapes of the bodies and chunks built back.
#include <gtest/gtest.h>

#include "graphed/serve/api_error.h"
#include "graphed/serve/openai_protocol.h"
#include "graphed/serve/structured_output.h"

namespace graphed::serve {
namespace {

using json = nlohmann::ordered_json;

/// The ApiError a parser gives for a body, as "status param: message".
template <typename Parse>
std::string error_of(Parse parse, const json& body) {
  try {
    parse(body);
  } catch (const ApiError& error) {
    return std::to_string(error.status()) + " " + error.param() + ": " + error.what();
  }
  return "no error";
}

std::string completion_error(const json& body) { return error_of(parse_completion_request, body); }
std::string chat_error(const json& body) { return error_of(parse_chat_request, body); }

TEST(OpenAiProtocolTest, CompletionDefaultsAreOpenAis) {
  const CompletionRequest request = parse_completion_request(json{{"model", "m"}, {"prompt", "Hi"}});
  EXPECT_EQ(request.model, "m");
  ASSERT_EQ(request.prompts.size(), 1u);
  EXPECT_EQ(*request.prompts[0].text, "Hi");
  EXPECT_FALSE(request.generation.max_tokens.has_value());
  EXPECT_EQ(request.generation.temperature, 1.0);
  EXPECT_EQ(request.generation.top_p, 1.0);
  EXPECT_EQ(request.generation.top_k, 0);
  EXPECT_FALSE(request.generation.seed.has_value());
  EXPECT_FALSE(request.generation.stream);
}

TEST(OpenAiProtocolTest, ReadsEveryGenerationField) {
  const CompletionRequest request = parse_completion_request(json::parse(R"({
    "prompt": [[5, 6, 7]], "max_tokens": 9, "temperature": 0, "top_p": 0.5, "top_k": 40, "seed": 7,
    "stop": ["END", 13], "stop_token_ids": [2], "ignore_eos": true, "stream": true,
    "stream_options": {"include_usage": true}, "n": 1, "logprobs": null, "presence_penalty": 0})"));
  ASSERT_EQ(request.prompts.size(), 1u);
  EXPECT_EQ(request.prompts[0].ids, (std::vector<int64_t>{5, 6, 7}));
  EXPECT_EQ(*request.generation.max_tokens, 9);
  EXPECT_EQ(request.generation.temperature, 0.0);
  EXPECT_EQ(request.generation.top_p, 0.5);
  EXPECT_EQ(request.generation.top_k, 40);
  EXPECT_EQ(*request.generation.seed, 7u);
  EXPECT_EQ(request.generation.stop_strings, std::vector<std::string>{"END"});
  EXPECT_EQ(request.generation.stop_ids, (std::vector<int64_t>{13, 2}));
  EXPECT_TRUE(request.generation.ignore_eos);
  EXPECT_TRUE(request.generation.stream);
  EXPECT_TRUE(request.generation.include_usage);
}

/// LangChain's OpenAI.generate(["The", "Our"]) sends a list of prompts: one choice each, index in order.
TEST(OpenAiProtocolTest, AListOfPromptsIsSeveralPrompts) {
  const CompletionRequest texts = parse_completion_request(json{{"prompt", {"The", "Our"}}});
  ASSERT_EQ(texts.prompts.size(), 2u);
  EXPECT_EQ(*texts.prompts[0].text, "The");
  EXPECT_EQ(*texts.prompts[1].text, "Our");
  const CompletionRequest ids = parse_completion_request(json::parse(R"({"prompt": [[1, 2], [3]]})"));
  ASSERT_EQ(ids.prompts.size(), 2u);
  EXPECT_FALSE(ids.prompts[1].text.has_value());
  EXPECT_EQ(ids.prompts[1].ids, std::vector<int64_t>{3});
  const CompletionRequest one = parse_completion_request(json::parse(R"({"prompt": [1, 2]})"));
  ASSERT_EQ(one.prompts.size(), 1u);
  EXPECT_EQ(one.prompts[0].ids, (std::vector<int64_t>{1, 2}));
  const json body = completion_body({"cmpl-2", "m", 1}, {{"a", "stop"}, {"b", "length"}}, Usage{4, 3});
  ASSERT_EQ(body["choices"].size(), 2u);
  EXPECT_EQ(body["choices"][1]["index"], 1);
  EXPECT_EQ(body["choices"][1]["text"], "b");
  EXPECT_EQ(body["choices"][1]["finish_reason"], "length");
}

TEST(OpenAiProtocolTest, EveryMistakeNamesItsFieldAndWhatToSend) {
  EXPECT_EQ(completion_error(json::object()), "400 prompt: 'prompt' is missing; send the text to continue as a string");
  EXPECT_EQ(completion_error({{"prompt", 5}}),
            "400 prompt: 'prompt' is an integer; send a string, an array of token ids, or an array of several of "
            "either");
  EXPECT_EQ(
      completion_error({{"prompt", {"a", 5}}}),
      "400 prompt[1]: 'prompt[1]' is an integer; send a string or an array of token ids, as the prompts before it");
  EXPECT_EQ(completion_error({{"prompt", json::array()}}),
            "400 prompt: 'prompt' is an empty array; send a string, an array of token ids, or an array of several of "
            "either");
  // A type that is not a string is a 400, not an internal error.
  EXPECT_NE(completion_error({{"prompt", "x"}, {"response_format", {{"type", 5}}}}).find("400 response_format"),
            std::string::npos);
  EXPECT_NE(chat_error({{"messages", {{{"role", "user"}, {"content", {{{"type", 5}, {"text", "x"}}}}}}}}).find("400"),
            std::string::npos);
  EXPECT_EQ(completion_error({{"prompt", "x"}, {"temperature", "hot"}}),
            "400 temperature: 'temperature' is a string; send a number from 0 to 2");
  EXPECT_EQ(completion_error({{"prompt", "x"}, {"temperature", 3}}),
            "400 temperature: 'temperature' is 3; send a number from 0 to 2");
  EXPECT_EQ(completion_error({{"prompt", "x"}, {"max_tokens", 0}}),
            "400 max_tokens: 'max_tokens' is 0; send an integer from 1 to 2147483647");
  EXPECT_EQ(completion_error({{"prompt", "x"}, {"max_tokens", 2.5}}),
            "400 max_tokens: 'max_tokens' is a number; send an integer from 1 to 2147483647");
  EXPECT_EQ(completion_error({{"prompt", "x"}, {"n", 2}}), "no error");  // n choices of the prompt
  EXPECT_EQ(parse_completion_request({{"prompt", "x"}, {"n", 3}}).generation.choices, 3);
  EXPECT_EQ(parse_completion_request({{"prompt", "x"}}).generation.choices, 1);
  EXPECT_EQ(completion_error({{"prompt", "x"}, {"n", 0}}), "400 n: 'n' is 0; send an integer from 1 to 128");
  EXPECT_EQ(completion_error({{"prompt", "x"}, {"n", 129}}), "400 n: 'n' is 129; send an integer from 1 to 128");
  EXPECT_NE(completion_error({{"prompt", "x"}, {"best_of", 3}}).find("400 best_of: 'best_of' is not supported"),
            std::string::npos);
  EXPECT_EQ(completion_error({{"prompt", "x"}, {"logprobs", 21}}),
            "400 logprobs: 'logprobs' is 21; send an integer from 0 to 20");
  EXPECT_EQ(completion_error({{"prompt", {"a", "b"}}}), "no error");  // several prompts: one choice each
  EXPECT_NE(completion_error({{"prompt", "x"}, {"stop", {1.5}}}).find("400 stop: 'stop' is a number"),
            std::string::npos);
  EXPECT_NE(completion_error({{"prompt", "x"}, {"stop", ""}}).find("empty string"), std::string::npos);
  EXPECT_NE(completion_error({{"prompt", "x"}, {"model", 3}}).find("400 model: 'model' is an integer"),
            std::string::npos);
  EXPECT_NE(completion_error({{"prompt", "x"}, {"top_p", 0}}).find("400 top_p"), std::string::npos);
  EXPECT_NE(completion_error({{"prompt", "x"}, {"stream", "yes"}}).find("'stream' is a string; send true or false"),
            std::string::npos);
}

/// Penalties, logit_bias, min_tokens, min_p and log probabilities in both endpoints' forms.
TEST(OpenAiProtocolTest, ReadsSamplingControlsAndLogprobs) {
  const CompletionRequest completion = parse_completion_request(json::parse(R"({"prompt": "x", "max_tokens": 8,
    "presence_penalty": 0.5, "frequency_penalty": -1, "repetition_penalty": 1.2, "logit_bias": {"50256": -100, "11": 5,
    "7": 0}, "min_tokens": 3, "min_p": 0.05, "logprobs": 3})"));
  const SamplingFields& sampling = completion.generation.sampling;
  EXPECT_EQ(sampling.presence_penalty, 0.5);
  EXPECT_EQ(sampling.frequency_penalty, -1.0);
  EXPECT_EQ(sampling.repetition_penalty, 1.2);
  const std::vector<std::pair<int64_t, double>> biases{{50256, -100.0}, {11, 5.0}};  // a bias of 0 is no bias
  EXPECT_EQ(sampling.logit_bias, biases);
  EXPECT_EQ(sampling.min_tokens, 3);
  EXPECT_EQ(sampling.min_p, 0.05);
  EXPECT_EQ(sampling.logprobs, 3);
  EXPECT_EQ(sampling.first_control(), "presence_penalty");
  const SamplingFields none = parse_completion_request({{"prompt", "x"}, {"logprobs", false}}).generation.sampling;
  EXPECT_EQ(none.logprobs, -1);
  EXPECT_EQ(none.first_control(), "");
  EXPECT_EQ(parse_completion_request({{"prompt", "x"}, {"logprobs", 0}}).generation.sampling.logprobs, 0);
  const json messages = json::parse(R"([{"role": "user", "content": "x"}])");
  EXPECT_EQ(parse_chat_request({{"messages", messages}, {"logprobs", true}, {"top_logprobs", 2}})
                .generation.sampling.logprobs,
            2);
  EXPECT_EQ(parse_chat_request({{"messages", messages}, {"logprobs", true}}).generation.sampling.logprobs, 0);
  EXPECT_EQ(parse_chat_request({{"messages", messages}, {"logprobs", false}}).generation.sampling.logprobs, -1);
}

TEST(OpenAiProtocolTest, SamplingControlsOutOfRangeAreRefusedByName) {
  const auto with = [](const char* field, json value) { return json{{"prompt", "x"}, {field, std::move(value)}}; };
  EXPECT_EQ(completion_error(with("presence_penalty", 3)),
            "400 presence_penalty: 'presence_penalty' is 3; send a number from -2 to 2");
  EXPECT_EQ(completion_error(with("frequency_penalty", "high")),
            "400 frequency_penalty: 'frequency_penalty' is a string; send a number from -2 to 2");
  EXPECT_EQ(completion_error(with("repetition_penalty", 0)),
            "400 repetition_penalty: 'repetition_penalty' is 0; send a number above 0 (1 = none, above 1 discourages "
            "repeats)");
  EXPECT_EQ(completion_error(with("logit_bias", {{"50256", 150}})),
            "400 logit_bias: 'logit_bias' gives token 50256 a bias of 150; send biases from -100 to 100 (-100 bans "
            "the token, 100 makes it all but certain)");
  EXPECT_NE(completion_error(with("logit_bias", {{"the", 1}})).find("'logit_bias' has the key \"the\", which is not"),
            std::string::npos);
  EXPECT_NE(completion_error(with("logit_bias", {{"5", "1"}})).find("'logit_bias' gives token 5 a string"),
            std::string::npos);
  EXPECT_NE(completion_error(with("logit_bias", {1, 2})).find("400 logit_bias: 'logit_bias' is an array"),
            std::string::npos);
  EXPECT_EQ(completion_error(with("min_p", 1.5)), "400 min_p: 'min_p' is 1.5; send a number from 0 to 1");
  EXPECT_EQ(completion_error(with("min_tokens", -1)),
            "400 min_tokens: 'min_tokens' is -1; send an integer from 0 to 2147483647");
  EXPECT_EQ(completion_error({{"prompt", "x"}, {"max_tokens", 4}, {"min_tokens", 5}}),
            "400 min_tokens: 'min_tokens' is 5, more than the request's max_tokens (4); send at most that many");
  EXPECT_NE(completion_error(with("logprobs", true)).find("400 logprobs: 'logprobs' is a boolean; send an integer"),
            std::string::npos);
  EXPECT_NE(completion_error(with("top_logprobs", 2)).find("400 top_logprobs: 'top_logprobs' is a chat completions"),
            std::string::npos);
  const json messages = json::parse(R"([{"role": "user", "content": "x"}])");
  EXPECT_EQ(chat_error({{"messages", messages}, {"top_logprobs", 2}}),
            "400 top_logprobs: 'top_logprobs' needs 'logprobs': true; send both, or leave top_logprobs out");
  EXPECT_EQ(chat_error({{"messages", messages}, {"logprobs", true}, {"top_logprobs", 21}}),
            "400 top_logprobs: 'top_logprobs' is 21; send an integer from 0 to 20");
  EXPECT_EQ(chat_error({{"messages", messages}, {"logprobs", 3}}),
            "400 logprobs: 'logprobs' is an integer; send true or false");
}

/// response_format: text is nothing; json_object and json_schema compile once into the request's grammar.
TEST(OpenAiProtocolTest, ResponseFormatCompilesItsGrammar) {
  EXPECT_EQ(parse_completion_request({{"prompt", "x"}}).generation.grammar, nullptr);
  EXPECT_EQ(parse_completion_request({{"prompt", "x"}, {"response_format", {{"type", "text"}}}}).generation.grammar,
            nullptr);
  const GenerationFields object =
      parse_completion_request({{"prompt", "x"}, {"response_format", {{"type", "json_object"}}}}).generation;
  ASSERT_NE(object.grammar, nullptr);
  EXPECT_EQ(object.grammar->source, "json_object");
  EXPECT_EQ(object.grammar_param, "response_format");
  const json messages = json::parse(R"([{"role": "user", "content": "x"}])");
  const ChatRequest schema =
      parse_chat_request(json{{"messages", messages}, {"response_format", json::parse(R"({"type": "json_schema",
      "json_schema": {"name": "point", "strict": true, "schema": {"type": "object",
        "properties": {"x": {"type": "integer"}}, "required": ["x"], "additionalProperties": false}}})")}});
  ASSERT_NE(schema.generation.grammar, nullptr);
  EXPECT_EQ(schema.generation.grammar->source, "json_schema");
}

TEST(OpenAiProtocolTest, ResponseFormatMistakesAreRefusedByName) {
  const auto format = [](const char* text) { return json{{"prompt", "x"}, {"response_format", json::parse(text)}}; };
  EXPECT_EQ(completion_error(format(R"({"type": "yaml"})")),
            "400 response_format: 'response_format.type' is \"yaml\"; send {\"type\": \"text\"}, {\"type\": "
            "\"json_object\"} or {\"type\": \"json_schema\", \"json_schema\": {...}}");
  EXPECT_NE(completion_error(format(R"({"type": "json_schema"})"))
                .find("400 response_format.json_schema: 'response_format.json_schema' is missing"),
            std::string::npos);
  EXPECT_EQ(completion_error(format(R"({"type": "json_schema", "json_schema": {"name": "x"}})")),
            "400 response_format.json_schema.schema: 'response_format.json_schema.schema' is missing; send the JSON "
            "schema the reply must follow");
  // Every unsupported keyword is named, with its path, in one message.
  const std::string refused = completion_error(format(R"({"type": "json_schema", "json_schema": {"name": "x",
      "schema": {"type": "object", "properties": {"name": {"type": "string", "format": "hostname"},
                 "age": {"type": "integer", "minimum": 0}}}}})"));
  EXPECT_EQ(refused.rfind("400 response_format.json_schema.schema: 'response_format.json_schema.schema': the schema "
                          "uses keywords graphed does not support: 'format' \"hostname\" at /properties/name (graphed "
                          "follows date-time, date, time, uuid, ipv4, email), 'minimum' at /properties/age; fix: ",
                          0),
            0u)
      << refused;
}

/// vLLM's structured_outputs and its older guided_* fields: each form read into its grammar, one form per request.
TEST(OpenAiProtocolTest, VllmStructuredOutputFormsAreReadIntoGrammars) {
  const auto source = [](const json& body) {
    const CompletionRequest request = parse_completion_request(body);
    return request.generation.grammar == nullptr
               ? std::string("none")
               : request.generation.grammar->source + " from " + request.generation.grammar_param;
  };
  const json schema = {{"type", "object"}, {"properties", {{"a", {{"type", "integer"}}}}}};
  EXPECT_EQ(source({{"prompt", "x"}, {"structured_outputs", {{"json", schema}}}}),
            "json_schema from structured_outputs");
  EXPECT_EQ(source({{"prompt", "x"}, {"structured_outputs", {{"json", schema.dump()}}}}),
            "json_schema from structured_outputs");
  EXPECT_EQ(source({{"prompt", "x"}, {"structured_outputs", {{"regex", "[a-z]+@x\\.com"}}}}),
            "regex from structured_outputs");
  EXPECT_EQ(source({{"prompt", "x"}, {"structured_outputs", {{"choice", {"yes", "no"}}}}}),
            "choice from structured_outputs");
  EXPECT_EQ(source({{"prompt", "x"}, {"structured_outputs", {{"json_object", true}, {"regex", nullptr}}}}),
            "json_object from structured_outputs");
  // Fields written as null, and vLLM's backend switches, leave the one form that is given.
  EXPECT_EQ(
      source({{"prompt", "x"},
              {"structured_outputs",
               {{"regex", "a"}, {"grammar", nullptr}, {"disable_fallback", true}, {"disable_any_whitespace", false}}}}),
      "regex from structured_outputs");
  EXPECT_EQ(source({{"prompt", "x"}, {"guided_json", schema}}), "json_schema from guided_json");
  EXPECT_EQ(source({{"prompt", "x"}, {"guided_regex", "a|b"}, {"guided_decoding_backend", "xgrammar"}}),
            "regex from guided_regex");
  EXPECT_EQ(source({{"prompt", "x"}, {"guided_choice", {"red", "blue"}}}), "choice from guided_choice");
  EXPECT_EQ(source({{"prompt", "x"}, {"response_format", {{"type", "text"}}}}), "none");
}

TEST(OpenAiProtocolTest, VllmStructuredOutputMistakesAreRefusedByName) {
  EXPECT_EQ(completion_error({{"prompt", "x"}, {"guided_grammar", "root ::= \"a\""}}),
            "400 guided_grammar: 'guided_grammar' (vLLM's structured output) is not supported; send response_format, "
            "or structured_outputs with json, regex or choice, instead");
  EXPECT_EQ(completion_error({{"prompt", "x"}, {"structured_outputs", {{"grammar", "root ::= \"a\""}}}}),
            "400 structured_outputs.grammar: 'structured_outputs.grammar' is not supported; send one of json (a "
            "schema), regex, choice or json_object instead");
  EXPECT_EQ(completion_error({{"prompt", "x"}, {"structured_outputs", {{"regex", "a"}, {"choice", {"a"}}}}}),
            "400 structured_outputs: 'structured_outputs' gives 2 forms; send exactly one of json (a schema), regex, "
            "choice or json_object");
  EXPECT_EQ(completion_error({{"prompt", "x"}, {"structured_outputs", {{"jsn", 1}}}}),
            "400 structured_outputs.jsn: 'structured_outputs.jsn' is not a field graphed knows; send one of json (a "
            "schema), regex, choice or json_object");
  EXPECT_EQ(completion_error({{"prompt", "x"}, {"guided_choice", json::array()}}),
            "400 guided_choice: 'guided_choice' is an empty array; send a non-empty array of the texts the output may "
            "be");
  EXPECT_EQ(completion_error({{"prompt", "x"}, {"guided_regex", "(a"}}),
            "400 guided_regex: 'guided_regex': the regular expression '(a' has a '(' that is never closed at character "
            "2, which graphed cannot follow; fix: rewrite the pattern without it (docs/serving.md lists the supported "
            "syntax)");
  EXPECT_EQ(completion_error({{"prompt", "x"}, {"guided_json", "[1]"}}),
            "400 guided_json: 'guided_json' is JSON text holding an array; send a JSON schema (an object)");
  EXPECT_EQ(completion_error({{"prompt", "x"}, {"structured_outputs", {{"regex", "a"}, {"disable_fallback", "yes"}}}}),
            "400 structured_outputs.disable_fallback: 'structured_outputs.disable_fallback' is a string; send true or "
            "false");
  EXPECT_EQ(completion_error({{"prompt", "x"}, {"guided_regex", "\\uD83D"}}),
            "400 guided_regex: 'guided_regex': the regular expression '\\uD83D' has a lone surrogate escape (U+D83D is "
            "no character) at character 6, which graphed cannot follow; fix: rewrite the pattern without it "
            "(docs/serving.md lists the supported syntax)");
  EXPECT_EQ(completion_error({{"prompt", "x"}, {"guided_json", "{not json"}}),
            "400 guided_json: 'guided_json' is a string that is not JSON; send the JSON schema as an object");
  EXPECT_EQ(completion_error({{"prompt", "x"}, {"response_format", {{"type", "json_object"}}}, {"guided_regex", "a"}}),
            "400 guided_regex: 'response_format' and 'guided_regex' both constrain the output; send one of them");
}

/// tool_choice "required" or a named function: the functions a call may take, checked against the tools.
TEST(OpenAiProtocolTest, ToolChoiceRequiredOrNamedNarrowsTheCallableFunctions) {
  const json tools = json::parse(R"([{"type": "function", "function": {"name": "get_weather", "parameters": {}}},
                                     {"type": "function", "function": {"name": "add"}}])");
  const json messages = json::parse(R"([{"role": "user", "content": "x"}])");
  const ChatRequest required =
      parse_chat_request({{"messages", messages}, {"tools", tools}, {"tool_choice", "required"}});
  EXPECT_EQ(required.tool_choice, ToolChoice::kRequired);
  EXPECT_EQ(required.callable, (std::vector<std::string>{"get_weather", "add"}));
  const json named{{"type", "function"}, {"function", {{"name", "add"}}}};
  const ChatRequest function = parse_chat_request({{"messages", messages}, {"tools", tools}, {"tool_choice", named}});
  EXPECT_EQ(function.tool_choice, ToolChoice::kFunction);
  EXPECT_EQ(function.callable, std::vector<std::string>{"add"});
  EXPECT_EQ(parse_chat_request({{"messages", messages}, {"tools", tools}}).tool_choice, ToolChoice::kAuto);
  const json unknown{{"type", "function"}, {"function", {{"name", "sub"}}}};
  EXPECT_EQ(chat_error({{"messages", messages}, {"tools", tools}, {"tool_choice", unknown}}),
            "400 tool_choice: 'tool_choice' names the function 'sub', which 'tools' does not define; send one of: "
            "get_weather, add");
  EXPECT_EQ(chat_error({{"messages", messages}, {"tool_choice", "required"}}),
            "400 tool_choice: 'tool_choice' requires a call, but the request has no tools; send the functions in "
            "'tools', or tool_choice \"auto\"");
  EXPECT_NE(chat_error({{"messages", messages}, {"tools", tools}, {"tool_choice", "any"}})
                .find("400 tool_choice: 'tool_choice' is \"any\"; send \"auto\", \"none\", \"required\" or"),
            std::string::npos);
  EXPECT_NE(chat_error({{"messages", messages}, {"tools", tools}, {"tool_choice", {{"type", "function"}}}})
                .find("400 tool_choice: 'tool_choice' is an object; send"),
            std::string::npos);
  EXPECT_EQ(chat_error({{"messages", messages},
                        {"tools", tools},
                        {"tool_choice", "required"},
                        {"response_format", {{"type", "json_object"}}}}),
            "400 response_format: 'response_format' and a 'tool_choice' that requires a call both constrain the "
            "reply; send one of them");
}

/// Each choice's logprobs (null when not asked for) sit beside its text, whole and in chunks.
TEST(OpenAiProtocolTest, LogprobsSitInEachChoice) {
  const ResponseHeader header{"cmpl-1", "m", 100};
  ChoiceText text{"a", "length", std::nullopt};
  text.logprobs = json{{"tokens", {"a"}}};
  const json body = completion_body(header, {text, ChoiceText{"b", "stop", std::nullopt}}, Usage{1, 2});
  EXPECT_EQ(body["choices"][0]["logprobs"]["tokens"][0], "a");
  EXPECT_TRUE(body["choices"][1]["logprobs"].is_null());
  EXPECT_EQ(completion_chunk(header, 0, "a", std::nullopt, text.logprobs)["choices"][0]["logprobs"], text.logprobs);
  const json content{{"content", json::array()}};
  EXPECT_EQ(chat_chunk(header, 0, {{"content", "a"}}, std::nullopt, content)["choices"][0]["logprobs"], content);
  EXPECT_TRUE(chat_chunk(header, 0, {{"content", "a"}}, std::nullopt)["choices"][0]["logprobs"].is_null());
}

TEST(OpenAiProtocolTest, BodiesThatAreNotJsonObjectsAreRefused) {
  EXPECT_THROW(parse_body("{\"prompt\": "), ApiError);
  EXPECT_THROW(parse_body("[1, 2]"), ApiError);
  EXPECT_EQ(parse_body("{\"a\": 1}")["a"], 1);
}

TEST(OpenAiProtocolTest, ChatMessagesAreCheckedAndTextPartsJoined) {
  const ChatRequest request = parse_chat_request(json::parse(R"({"messages": [
      {"role": "system", "content": "Be brief."},
      {"role": "user", "content": [{"type": "text", "text": "Hi "}, {"type": "text", "text": "there"}]},
      {"role": "assistant", "content": null, "tool_calls": [
        {"type": "function", "function": {"name": "f", "arguments": "{\"city\": \"Paris\"}"}},
        {"type": "function", "function": {"name": "g", "arguments": "not json"}},
        {"type": "function", "function": {"name": "h", "arguments": ""}}]},
      {"role": "tool", "tool_call_id": "call_1", "content": "22.5"}],
    "max_completion_tokens": 4, "chat_template_kwargs": {"enable_thinking": false}})"));
  EXPECT_EQ(request.messages[1]["content"], "Hi there");
  EXPECT_TRUE(request.messages[2]["content"].is_null());
  EXPECT_EQ(request.messages[2]["tool_calls"][0]["function"]["name"], "f");
  // Arguments sent as JSON text reach the template as objects (Llama's writes them with tojson); others as sent.
  EXPECT_EQ(request.messages[2]["tool_calls"][0]["function"]["arguments"], json({{"city", "Paris"}}));
  EXPECT_EQ(request.messages[2]["tool_calls"][1]["function"]["arguments"], "not json");
  EXPECT_EQ(request.messages[2]["tool_calls"][2]["function"]["arguments"], json::object());
  EXPECT_EQ(request.messages[3]["content"], "22.5");
  EXPECT_EQ(*request.generation.max_tokens, 4);
  EXPECT_EQ(request.template_kwargs["enable_thinking"], false);
  EXPECT_TRUE(request.add_generation_prompt);
  EXPECT_EQ(chat_error(json::object()),
            "400 messages: 'messages' is missing; send an array of {\"role\", \"content\"} objects");
  EXPECT_NE(chat_error({{"messages", json::array()}}).find("a non-empty array"), std::string::npos);
  EXPECT_NE(chat_error({{"messages", {{{"role", "robot"}, {"content", "x"}}}}}).find("400 messages[0].role"),
            std::string::npos);
  EXPECT_NE(chat_error({{"messages", {{{"role", "user"}}}}})
                .find("400 messages[0].content: 'messages[0].content' is missing"),
            std::string::npos);
  EXPECT_NE(chat_error({{"messages", {{{"role", "user"}, {"content", {{{"type", "image_url"}}}}}}}}).find("not text"),
            std::string::npos);
  EXPECT_NE(chat_error({{"messages", {{{"role", "user"}, {"content", "x"}}}}, {"tool_choice", "required"}})
                .find("400 tool_choice"),
            std::string::npos);
}

/// A chat's callable functions come from its tools unless tool_choice is "none"; parallel_tool_calls is read.
TEST(OpenAiProtocolTest, ToolsGiveTheCallableFunctions) {
  const json tools = json::parse(R"([{"type": "function", "function": {"name": "get_weather", "parameters": {}}},
                                     {"type": "function", "function": {"name": "add"}}])");
  const json messages = json::parse(R"([{"role": "user", "content": "x"}])");
  const ChatRequest with_tools = parse_chat_request({{"messages", messages}, {"tools", tools}});
  EXPECT_EQ(with_tools.callable, (std::vector<std::string>{"get_weather", "add"}));
  EXPECT_TRUE(with_tools.parallel_tool_calls);
  const ChatRequest none = parse_chat_request(
      {{"messages", messages}, {"tools", tools}, {"tool_choice", "none"}, {"parallel_tool_calls", false}});
  EXPECT_TRUE(none.callable.empty());
  EXPECT_FALSE(none.parallel_tool_calls);
  EXPECT_TRUE(parse_chat_request({{"messages", messages}}).callable.empty());
}

/// A reply read as tool calls: message.content null (or the text before the calls), message.tool_calls, and a
/// stream's delta with each call's index.
TEST(OpenAiProtocolTest, ToolCallsHaveOpenAisShape) {
  const ResponseHeader header{"chatcmpl-1", "m", 100};
  ToolCallReply reply{std::nullopt, {ToolCall{"call_1", "add", "{\"a\":1}"}}};
  const json body = chat_body(header, {ChoiceText{"<tool_call>...", "tool_calls", reply}}, Usage{1, 1});
  const json& message = body["choices"][0]["message"];
  EXPECT_TRUE(message["content"].is_null());
  EXPECT_EQ(message["tool_calls"], json::parse(R"([{"id": "call_1", "type": "function",
                                                    "function": {"name": "add", "arguments": "{\"a\":1}"}}])"));
  EXPECT_EQ(body["choices"][0]["finish_reason"], "tool_calls");
  reply.content = "Adding.";
  EXPECT_EQ(chat_body(header, {ChoiceText{"", "tool_calls", reply}}, Usage{1, 1})["choices"][0]["message"]["content"],
            "Adding.");
  const json chunk = chat_tool_calls_chunk(header, 1, reply.calls);
  EXPECT_EQ(chunk["choices"][0]["index"], 1);
  EXPECT_EQ(chunk["choices"][0]["delta"]["tool_calls"][0]["index"], 0);
  EXPECT_EQ(chunk["choices"][0]["delta"]["tool_calls"][0]["function"]["name"], "add");
  EXPECT_TRUE(chunk["choices"][0]["finish_reason"].is_null());
}

TEST(OpenAiProtocolTest, ResponseShapesAreOpenAis) {
  const ResponseHeader header{"cmpl-1", "m", 100};
  const json body = completion_body(header, {ChoiceText{"text", "length", std::nullopt}}, Usage{3, 2});
  EXPECT_EQ(body["object"], "text_completion");
  EXPECT_EQ(body["choices"][0]["text"], "text");
  EXPECT_EQ(body["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(body["usage"], (json{{"prompt_tokens", 3}, {"completion_tokens", 2}, {"total_tokens", 5}}));
  EXPECT_TRUE(completion_chunk(header, 0, "t", std::nullopt)["choices"][0]["finish_reason"].is_null());
  EXPECT_EQ(completion_chunk(header, 2, "t", std::nullopt)["choices"][0]["index"], 2);
  const json chat = chat_body(
      header, {ChoiceText{"hi", "stop", std::nullopt}, ChoiceText{"yo", "length", std::nullopt}}, Usage{1, 2});
  EXPECT_EQ(chat["object"], "chat.completion");
  EXPECT_EQ(chat["choices"][0]["message"], (json{{"role", "assistant"}, {"content", "hi"}}));
  EXPECT_EQ(chat["choices"][1]["index"], 1);  // n choices, index in order
  EXPECT_EQ(chat["choices"][1]["message"]["content"], "yo");
  EXPECT_EQ(chat["choices"][1]["finish_reason"], "length");
  EXPECT_EQ(chat_chunk(header, 3, {{"content", "h"}}, std::nullopt)["choices"][0]["index"], 3);
  const json chunk = chat_chunk(header, 0, {{"content", "h"}}, std::nullopt);
  EXPECT_EQ(chunk["object"], "chat.completion.chunk");
  EXPECT_EQ(chunk["choices"][0]["delta"]["content"], "h");
  const json usage = usage_chunk(header, "chat.completion.chunk", Usage{1, 2});
  EXPECT_TRUE(usage["choices"].empty());
  EXPECT_EQ(usage["usage"]["total_tokens"], 3);
  const json error = invalid_request("bad", "prompt").body();
  EXPECT_EQ(error["error"]["message"], "bad");
  EXPECT_EQ(error["error"]["type"], "invalid_request_error");
  EXPECT_EQ(error["error"]["param"], "prompt");
  EXPECT_EQ(error["error"]["code"], 400);
}

}  // namespace
}  // namespace graphed::serve
