// tests/grammar/json_schema_walk_test.cpp — seeded random walks over a synthetic vocabulary through the
// token masks of each corpus schema: every finished document parses and satisfies the schema (checked by a
// small reference validator of the supported subset), every walk cut at the length cap is an accepted
// prefix, and no step is a dead end.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <random>
#include <regex>

#include <nlohmann/json.hpp>

#include "grammar/schema_corpus.h"
#include "grammar/synthetic_vocabulary.h"
#include "graphed/grammar/json_schema.h"
#include "graphed/grammar/token_mask.h"

namespace graphed::grammar {
namespace {

using Json = nlohmann::json;

std::size_t code_points(const std::string& text) {
  std::size_t count = 0;
  for (char byte : text) count += (static_cast<unsigned char>(byte) & 0xC0) != 0x80;
  return count;
}

// The reference validator: the keywords of json_schema.h's subset, with its strict-object reading.
class ReferenceValidator {
 public:
  explicit ReferenceValidator(const Json& root) : root_(root) {}

  bool valid(const Json& value, const Json& schema) const {
    if (schema.is_boolean()) return schema.get<bool>();
    if (schema.contains("$ref")) {
      return valid(value, root_.at(Json::json_pointer(schema["$ref"].get<std::string>().substr(1))));
    }
    if (schema.contains("anyOf") || schema.contains("oneOf")) return valid_alternatives(value, schema);
    if (schema.contains("const") && value != schema["const"]) return false;
    if (schema.contains("enum") &&
        std::find(schema["enum"].begin(), schema["enum"].end(), value) == schema["enum"].end()) {
      return false;
    }
    if (schema.contains("type") && !has_a_type(value, schema["type"])) return false;
    if (value.is_object()) return valid_object(value, schema);
    if (value.is_array()) return valid_array(value, schema);
    if (value.is_string()) {
      const std::string text = value.get<std::string>();
      if (schema.contains("pattern") && !std::regex_search(text, std::regex(schema["pattern"].get<std::string>())))
        return false;
      if (schema.contains("format") && !valid_format(text, schema["format"].get<std::string>())) return false;
      const std::size_t length = code_points(text);
      return length >= schema.value("minLength", 0u) && length <= schema.value("maxLength", 1u << 30);
    }
    return true;
  }

 private:
  bool valid_alternatives(const Json& value, const Json& schema) const {
    const bool one_of = schema.contains("oneOf");
    int matched = 0;
    for (const Json& branch : schema[one_of ? "oneOf" : "anyOf"]) matched += valid(value, branch);
    return one_of ? matched == 1 : matched >= 1;
  }

  static bool has_a_type(const Json& value, const Json& type) {
    for (const Json& name : type.is_array() ? type : Json::array({type})) {
      const std::string text = name.get<std::string>();
      const bool integral = value.is_number_integer() ||
                            (value.is_number_float() && std::floor(value.get<double>()) == value.get<double>());
      if ((text == "object" && value.is_object()) || (text == "array" && value.is_array()) ||
          (text == "string" && value.is_string()) || (text == "number" && value.is_number()) ||
          (text == "integer" && integral) || (text == "boolean" && value.is_boolean()) ||
          (text == "null" && value.is_null())) {
        return true;
      }
    }
    return false;
  }

  bool valid_object(const Json& value, const Json& schema) const {
    const Json properties = schema.value("properties", Json::object());
    for (const Json& name : schema.value("required", Json::array())) {
      if (!value.contains(name.get<std::string>())) return false;
    }
    const bool closed =
        schema.contains("properties") || schema.contains("additionalProperties") || schema.contains("required");
    for (const auto& [name, member] : value.items()) {
      if (!properties.contains(name)) {
        if (closed) return false;
        continue;
      }
      if (!valid(member, properties[name])) return false;
    }
    return true;
  }

  // The formats by their definitions, not by graphed's patterns: a real calendar date, 8-4-4-4-12 hex digits,
  // four decimal octets without leading zeros.
  static bool valid_format(const std::string& text, const std::string& format) {
    if (format == "date") {
      int year = 0, month = 0, day = 0;
      if (text.size() != 10 || std::sscanf(text.c_str(), "%4d-%2d-%2d", &year, &month, &day) != 3) return false;
      const int lengths[] = {
          31, (year % 4 == 0 && (year % 100 != 0 || year % 400 == 0)) ? 29 : 28, 31, 30, 31, 30, 31, 31, 30, 31, 30,
          31};
      return month >= 1 && month <= 12 && day >= 1 && day <= lengths[month - 1];
    }
    if (format == "uuid") {
      return std::regex_match(text, std::regex("[0-9a-fA-F]{8}(-[0-9a-fA-F]{4}){3}-[0-9a-fA-F]{12}"));
    }
    if (format == "ipv4") {
      std::size_t start = 0;
      for (int octet = 0; octet < 4; ++octet) {
        const std::size_t end = octet < 3 ? text.find('.', start) : text.size();
        if (end == std::string::npos) return false;
        const std::string part = text.substr(start, end - start);
        if (part.empty() || part.size() > 3 || (part.size() > 1 && part[0] == '0') ||
            part.find_first_not_of("0123456789") != std::string::npos || std::stoi(part) > 255)
          return false;
        start = end + 1;
      }
      return true;
    }
    if (format == "date-time") {
      const std::size_t t = text.find('T');
      return t == 10 && valid_format(text.substr(0, 10), "date") &&
             std::regex_match(text.substr(11), std::regex("\\d\\d:\\d\\d:\\d\\d(\\.\\d+)?(Z|[+-]\\d\\d:\\d\\d)"));
    }
    return false;
  }

  bool valid_array(const Json& value, const Json& schema) const {
    if (value.size() < schema.value("minItems", 0u) || value.size() > schema.value("maxItems", 1u << 30)) return false;
    const Json prefix = schema.value("prefixItems", Json::array());
    const Json items = schema.value("items", Json(prefix.empty()));
    for (std::size_t index = 0; index < value.size(); ++index) {
      if (!valid(value[index], index < prefix.size() ? prefix[index] : items)) return false;
    }
    return true;
  }

  const Json& root_;
};

struct WalkCounts {
  int finished = 0;
  int capped = 0;
};

// One walk: tokens chosen uniformly among the allowed ones; stops when finishing is allowed and a coin says
// so (or nothing else is allowed), or past the cap.
void walk(const Grammar& grammar, const TokenTrie& trie, const std::vector<std::string>& vocabulary,
          const ReferenceValidator& validator, const Json& schema, std::mt19937& random, WalkCounts& counts) {
  constexpr std::size_t kCapBytes = 256;
  Matcher matcher(grammar);
  std::string document;
  std::vector<std::uint32_t> bitmask;
  for (;;) {
    const std::int32_t allowed_count = allowed_tokens(matcher, trie, bitmask);
    ASSERT_FALSE(is_allowed(bitmask, trie.vocabulary_size() - 1)) << "the special token was allowed";
    ASSERT_TRUE(allowed_count > 0 || matcher.can_finish()) << "dead end after: " << document;
    if (matcher.can_finish() && (allowed_count == 0 || random() % 2 == 0)) {
      Json parsed;
      ASSERT_NO_THROW(parsed = Json::parse(document)) << document;
      ASSERT_TRUE(validator.valid(parsed, schema)) << document;
      ++counts.finished;
      return;
    }
    if (document.size() >= kCapBytes) {
      Matcher replay(grammar);
      ASSERT_TRUE(replay.accept_text(document)) << document;
      ++counts.capped;
      return;
    }
    std::vector<std::int32_t> allowed;
    for (std::int32_t token = 0; token < trie.vocabulary_size(); ++token) {
      if (is_allowed(bitmask, token)) allowed.push_back(token);
    }
    ASSERT_EQ(static_cast<std::int32_t>(allowed.size()), allowed_count);
    const std::string& bytes = vocabulary[static_cast<std::size_t>(allowed[random() % allowed.size()])];
    ASSERT_TRUE(matcher.accept_text(bytes)) << document << " + " << bytes;
    document += bytes;
  }
}

TEST(JsonSchemaWalkTest, RandomWalksFinishInValidDocuments) {
  const std::vector<std::string> vocabulary = testing::synthetic_vocabulary();
  const TokenTrie trie(vocabulary);
  for (const testing::SchemaCase& schema_case : testing::schema_corpus()) {
    SCOPED_TRACE(schema_case.name);
    const Json schema = Json::parse(schema_case.schema);
    const ReferenceValidator validator(schema);
    for (const std::string& document : schema_case.valid) ASSERT_TRUE(validator.valid(Json::parse(document), schema));
    const Grammar grammar = compile_json_schema_text(schema_case.schema);
    std::mt19937 random(12345);
    WalkCounts counts;
    for (int walk_index = 0; walk_index < 50; ++walk_index) {
      walk(grammar, trie, vocabulary, validator, schema, random, counts);
      if (::testing::Test::HasFatalFailure()) return;
    }
    EXPECT_EQ(counts.finished + counts.capped, 50);
    EXPECT_GT(counts.finished, 0) << "no walk finished";
  }
}

TEST(JsonSchemaWalkTest, AnyJsonObjectWalksFinishInObjects) {
  const std::vector<std::string> vocabulary = testing::synthetic_vocabulary();
  const TokenTrie trie(vocabulary);
  const Grammar grammar = any_json_object();
  const Json schema = Json::parse(R"({"type":"object"})");
  const ReferenceValidator validator(schema);
  std::mt19937 random(777);
  WalkCounts counts;
  for (int walk_index = 0; walk_index < 50 && !::testing::Test::HasFatalFailure(); ++walk_index) {
    walk(grammar, trie, vocabulary, validator, schema, random, counts);
  }
  EXPECT_EQ(counts.finished + counts.capped, 50);
}

}  // namespace
}  // namespace graphed::grammar
