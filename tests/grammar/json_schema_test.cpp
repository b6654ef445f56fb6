// tests/grammar/json_schema_test.cpp — compile_json_schema() on the corpus of schema_corpus.h: documents in
// canonical form are accepted byte by byte, others refused; any_json_object(); and the exact messages of
// refused and invalid schemas; framed documents (compile_framed_json_schema).
#include "graphed/grammar/json_schema.h"

#include <gtest/gtest.h>

#include "error_text.h"
#include "grammar/schema_corpus.h"
#include "graphed/grammar/matcher.h"

namespace graphed::grammar {
namespace {

using graphed::testing::error_text;
using testing::schema_corpus;

bool grammar_matches(const Grammar& grammar, const std::string& text) {
  Matcher matcher(grammar);
  return matcher.accept_text(text) && matcher.can_finish();
}

std::string refusal(const std::string& schema) {
  return error_text<SchemaError>([&] { compile_json_schema_text(schema); });
}

TEST(JsonSchemaTest, CorpusAcceptsValidAndRefusesInvalidDocuments) {
  for (const testing::SchemaCase& schema_case : schema_corpus()) {
    SCOPED_TRACE(schema_case.name);
    const Grammar grammar = compile_json_schema_text(schema_case.schema);
    for (const std::string& document : schema_case.valid) {
      Matcher matcher(grammar);
      for (std::size_t at = 0; at < document.size(); ++at) {
        ASSERT_TRUE(matcher.accept(static_cast<std::uint8_t>(document[at]))) << document << " refused at byte " << at;
      }
      EXPECT_TRUE(matcher.can_finish()) << document;
    }
    for (const std::string& document : schema_case.invalid) {
      EXPECT_FALSE(grammar_matches(grammar, document)) << document;
    }
  }
}

TEST(JsonSchemaTest, PropertiesComeInDeclaredOrderFromTextAndSortedFromJson) {
  const std::string schema =
      R"({"type":"object","properties":{"b":{"type":"null"},"a":{"type":"null"}},"required":["a","b"]})";
  EXPECT_TRUE(grammar_matches(compile_json_schema_text(schema), R"({"b":null,"a":null})"));
  EXPECT_FALSE(grammar_matches(compile_json_schema_text(schema), R"({"a":null,"b":null})"));
  EXPECT_TRUE(grammar_matches(compile_json_schema(nlohmann::json::parse(schema)), R"({"a":null,"b":null})"));
}

TEST(JsonSchemaTest, TypeObjectAloneAndEmptySchemaAcceptAnyValue) {
  const Grammar object = compile_json_schema_text(R"({"type":"object"})");
  EXPECT_TRUE(grammar_matches(object, R"({"x":[1,{"y":"z"}],"w":null})"));
  EXPECT_FALSE(grammar_matches(object, "[]"));
  const Grammar anything = compile_json_schema_text("{}");
  for (const char* document : {"1", "[]", R"("s")", "null", R"({"a":{}})", "[true,false,-1.5E+3]"}) {
    EXPECT_TRUE(grammar_matches(anything, document)) << document;
  }
  EXPECT_FALSE(grammar_matches(anything, "[1 ]"));
}

TEST(JsonSchemaTest, AnyJsonObjectNeedsAnObjectAtTheTop) {
  const Grammar grammar = any_json_object();
  EXPECT_TRUE(grammar_matches(grammar, "{}"));
  EXPECT_TRUE(grammar_matches(grammar, R"({"a":[1,2,{"b":"\u00e9"}],"c":true})"));
  EXPECT_FALSE(grammar_matches(grammar, "[1]"));
  EXPECT_FALSE(grammar_matches(grammar, R"({"a":1} )"));
  Matcher matcher(grammar);
  ASSERT_TRUE(matcher.accept_text("{}"));
  EXPECT_TRUE(matcher.accepts_nothing_more());
}

/// A tool call's format: documents between literal texts, one or several joined by a separator.
TEST(JsonSchemaTest, FramedDocumentsComeBetweenTheirTextsAndRepeatWithinTheirCounts) {
  const nlohmann::ordered_json schema = nlohmann::ordered_json::parse(R"({"enum":[1,2]})");
  const Grammar one = compile_framed_json_schema(schema, Framing{"<a>\n", "\n</a>", "\n", 1, 1});
  EXPECT_TRUE(grammar_matches(one, "<a>\n1\n</a>"));
  EXPECT_FALSE(grammar_matches(one, "1"));
  EXPECT_FALSE(grammar_matches(one, "<a>\n1\n</a>\n<a>\n2\n</a>"));
  Matcher complete(one);
  ASSERT_TRUE(complete.accept_text("<a>\n2\n</a>"));
  EXPECT_TRUE(complete.accepts_nothing_more());
  const Grammar several = compile_framed_json_schema(schema, Framing{"", "", ";", 1, -1});
  for (const char* document : {"1", "1;2", "2;2;1;1"}) EXPECT_TRUE(grammar_matches(several, document)) << document;
  EXPECT_FALSE(grammar_matches(several, "1;"));
  const Grammar bounded = compile_framed_json_schema(schema, Framing{"(", ")", ",", 2, 3});
  EXPECT_FALSE(grammar_matches(bounded, "(1)"));
  EXPECT_TRUE(grammar_matches(bounded, "(1),(2)"));
  EXPECT_TRUE(grammar_matches(bounded, "(1),(2),(1)"));
  EXPECT_FALSE(grammar_matches(bounded, "(1),(2),(1),(2)"));
}

TEST(JsonSchemaTest, RefusesUnsupportedKeywordsNamingEveryPath) {
  EXPECT_EQ(refusal(R"({"type":"object","patternProperties":{"^x":{}},"properties":{"name":{"type":"string",
               "pattern":"^[a-z]+$","maxLength":3},"n":{"type":"integer","minimum":0}}})"),
            "the schema uses keywords graphed does not support: 'patternProperties' at /, 'pattern' beside "
            "'maxLength' at /properties/name (write the length into the pattern, e.g. {1,20}), 'minimum' at "
            "/properties/n; fix: remove them (state such constraints in the prompt instead); docs/serving.md lists "
            "what structured output supports");
  EXPECT_EQ(refusal(R"({"type":"string","pattern":"(a)\\1"})"),
            "the schema uses keywords graphed does not support: 'pattern' at /: the regular expression '(a)\\1' has "
            "the backreference '\\1' at character 5, which graphed cannot follow; fix: remove them (state such "
            "constraints in the prompt instead); docs/serving.md lists what structured output supports");
  EXPECT_EQ(refusal(R"({"enum":["a","bb"],"pattern":"^a$"})"),
            "the schema uses keywords graphed does not support: 'pattern' beside 'enum' at / (list only the values "
            "that fit); fix: remove them (state such constraints in the prompt instead); docs/serving.md lists what "
            "structured output supports");
  EXPECT_EQ(refusal(R"({"anyOf":[{"type":"null"}],"type":"null","items":{"allOf":[]},"additionalProperties":true})"),
            "the schema uses keywords graphed does not support: 'type' beside 'anyOf' at /, 'items' beside 'anyOf' "
            "at /, 'additionalProperties' beside 'anyOf' at /; fix: remove them (state such constraints in the prompt "
            "instead); docs/serving.md lists what structured output supports");
  EXPECT_EQ(refusal(R"({"properties":{"a/b":{"format":"hostname"}},"additionalProperties":{},
               "items":{"$ref":"other.json#/x"}})"),
            "the schema uses keywords graphed does not support: 'format' \"hostname\" at /properties/a~1b (graphed "
            "follows date-time, date, time, uuid, ipv4, email), "
            "'additionalProperties' other than false at /, '$ref' to 'other.json#/x' (only #, #/$defs/... and "
            "#/definitions/...) at /items; fix: remove them (state such constraints in the prompt instead); "
            "docs/serving.md lists what structured output supports");
}

TEST(JsonSchemaTest, RefusesInvalidSchemas) {
  EXPECT_EQ(refusal(R"({"type":"array","minItems":-1,"items":{"type":"text"}})"),
            "the JSON schema is not valid: 'minItems' at / must be a non-negative integer, got -1, 'type' at /items "
            "must be one of object, array, string, number, integer, boolean, null or a list of them, got \"text\"; "
            "fix: correct the schema");
  EXPECT_EQ(refusal(R"({"$ref":"#/$defs/missing"})"),
            "the JSON schema is not valid: '$ref' at / points to '#/$defs/missing', which the schema does not define; "
            "fix: correct the schema");
  EXPECT_EQ(refusal(R"({"type":"object","properties":{"a":{}},"required":["b"]})"),
            "the JSON schema is not valid: 'required' at / names 'b', which 'properties' does not define (and "
            "additional properties are not allowed); fix: add it to 'properties' or drop it from 'required'");
  EXPECT_EQ(refusal(R"({"$defs":{"a":{"anyOf":[{"$ref":"#/$defs/b"}]},"b":{"$ref":"#/$defs/a"}},"$ref":"#/$defs/a"})"),
            "the JSON schema is not valid: '$ref' at /$defs/b to '#/$defs/a' refers back to itself before any object "
            "or array; fix: correct the schema");
  EXPECT_EQ(refusal(R"({"type":"string","minLength":3,"maxLength":2})"),
            "the JSON schema is not valid: 'minLength' at / is larger than 'maxLength'; fix: correct the schema");
  EXPECT_EQ(refusal(R"({"enum":[1,2],"type":"string"})"),
            "the JSON schema is not valid: no value of 'enum' or 'const' at / has a type 'type' allows; fix: correct "
            "the schema");
  EXPECT_EQ(refusal("{\"type\":"), refusal("{\"type\":"));
  EXPECT_NE(refusal("{\"type\":").find("the JSON schema is not JSON: "), std::string::npos);
  EXPECT_EQ(refusal(R"({"items":false,"prefixItems":[{}],"minItems":2})"),
            "the JSON schema is not valid: 'minItems' at / is 2 but the array can hold at most 1 items; fix: correct "
            "the schema");
}

TEST(JsonSchemaTest, LargeStringBoundsStayLinear) {
  const Grammar grammar = compile_json_schema_text(R"({"type":"string","minLength":1000,"maxLength":5000})");
  EXPECT_LT(grammar.rule_count(), 5000 + 100);
  EXPECT_TRUE(grammar_matches(grammar, "\"" + std::string(1000, 'x') + "\""));
  EXPECT_FALSE(grammar_matches(grammar, "\"" + std::string(999, 'x') + "\""));
}

}  // namespace
}  // namespace graphed::grammar
