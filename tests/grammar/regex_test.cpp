// tests/grammar/regex_test.cpp — compile_regex() against std::regex on every short string over a small alphabet,
// Unicode classes byte by byte against their code points, JSON schema patterns inside JSON strings,
// compile_choice(), and the messages of refused patterns.
#include "graphed/grammar/regex.h"

#include <gtest/gtest.h>

#include <regex>

#include "error_text.h"
#include "graphed/grammar/json_schema.h"
#include "graphed/grammar/matcher.h"
#include "graphed/util/utf8.h"

namespace graphed::grammar {
namespace {

using graphed::testing::error_text;

bool matches(const Grammar& grammar, const std::string& text) {
  Matcher matcher(grammar);
  return matcher.accept_text(text) && matcher.can_finish();
}

std::string utf8(std::uint32_t code_point) { return utf8_of(static_cast<char32_t>(code_point)); }

// Every string of up to five characters over {a, b, c, -}.
std::vector<std::string> short_strings() {
  std::vector<std::string> strings = {""};
  for (std::size_t begin = 0, length = 0; length < 5; ++length) {
    const std::size_t end = strings.size();
    for (std::size_t index = begin; index < end; ++index) {
      for (char character : std::string("abc-")) strings.push_back(strings[index] + character);
    }
    begin = end;
  }
  return strings;
}

TEST(RegexTest, MatchesWhatStdRegexMatchesOnEveryShortString) {
  const std::vector<std::string> patterns = {
      "a*",           "(a|b)+c?",         "a{2,3}b", "(a*b*)*",  "(a|)+c",     "(x?){2,3}a", "[a-b]{0,2}-?c", "[^a]*",
      "(ab|a)(c|bc)", "a+?b*?",           "\\-",     "[\\-a]+",  "(?:a|b){2}", "(a*)+b",     "((a|b)*c)?",    "a|b|",
      "^a|b$",        "(?<name>a|b)c{0}", "a{2,}",   "[abc]{3}", ".b.",        "\\w\\W?",    "(a?b?)+c",      "a{0,0}b",
      "(|a)(b|)",     "[^-]{1,2}"};
  const std::vector<std::string> strings = short_strings();
  for (const std::string& pattern : patterns) {
    SCOPED_TRACE(pattern);
    const Grammar grammar = compile_regex(pattern);
    // std::regex has no named groups: the same group unnamed stands in.
    const std::string plain = pattern.rfind("(?<name>", 0) == 0 ? "(" + pattern.substr(8) : pattern;
    const std::regex reference(plain);
    for (const std::string& text : strings) {
      ASSERT_EQ(matches(grammar, text), std::regex_match(text, reference)) << "'" << text << "'";
    }
  }
}

TEST(RegexTest, ClassesOfCodePointsMatchTheirUtf8ByteForByte) {
  const Grammar grammar = compile_regex("[\\u0100-\\u07FF\\u{FFF0}-\\u{10400}q]");
  auto member = [](std::uint32_t code_point) {
    return (code_point >= 0x100 && code_point <= 0x7FF) || (code_point >= 0xFFF0 && code_point <= 0x10400) ||
           code_point == 'q';
  };
  std::vector<std::uint32_t> code_points;
  for (std::uint32_t code_point = 0; code_point <= 0x10FFFF; code_point += 61) code_points.push_back(code_point);
  for (std::uint32_t edge : {0x7Fu, 0x80u, 0xFFu, 0x100u, 0x7FFu, 0x800u, 0xFFEFu, 0xFFF0u, 0xFFFFu, 0x10000u, 0x103FFu,
                             0x10400u, 0x10401u, 0x10FFFFu, static_cast<std::uint32_t>('q')}) {
    code_points.push_back(edge);
  }
  for (std::uint32_t code_point : code_points) {
    if (code_point >= 0xD800 && code_point <= 0xDFFF) continue;
    EXPECT_EQ(matches(grammar, utf8(code_point)), member(code_point)) << std::hex << code_point;
  }
  const Grammar negated = compile_regex("[^a\\u00e9]");
  EXPECT_TRUE(matches(negated, "\xc3\xa8"));          // è
  EXPECT_TRUE(matches(negated, "\xf0\x9f\x98\x80"));  // an emoji
  EXPECT_FALSE(matches(negated, "\xc3\xa9"));         // é
  EXPECT_FALSE(matches(negated, "a"));
  EXPECT_FALSE(matches(negated, "\xed\xa0\x80"));  // a lone surrogate is no character
  EXPECT_FALSE(matches(compile_regex("."), "\n"));
  EXPECT_TRUE(matches(compile_regex("[α-ω]+"), "αβω"));
  EXPECT_TRUE(matches(compile_regex("\\s"), "\xe3\x80\x80"));  // U+3000 is a space to ECMAScript
  EXPECT_TRUE(matches(compile_regex("\\uD83D\\uDE00[\\uD83D\\uDE01]"), "\xf0\x9f\x98\x80\xf0\x9f\x98\x81"));  // pairs
  EXPECT_TRUE(matches(compile_regex("[^]"), "\n"));  // JavaScript's any character at all
}

TEST(RegexTest, JsonSchemaPatternsAreSearchedInsideJsonStrings) {
  auto schema = [](const std::string& pattern) {
    return compile_json_schema(nlohmann::ordered_json{{"type", "string"}, {"pattern", pattern}});
  };
  const Grammar unanchored = schema("b+");
  EXPECT_TRUE(matches(unanchored, R"("abbc")"));
  EXPECT_TRUE(matches(unanchored, R"("b")"));
  EXPECT_FALSE(matches(unanchored, R"("ac")"));
  const Grammar start = schema("^b");
  EXPECT_TRUE(matches(start, R"("bz")"));
  EXPECT_FALSE(matches(start, R"("ab")"));
  const Grammar escapes = schema("^a\"\\\\\\n\\u0001$");  // a, a quote, a backslash, a newline, U+0001
  EXPECT_TRUE(matches(escapes, R"("a\"\\\n\u0001")"));
  EXPECT_FALSE(matches(escapes, "\"a\"\\\n\x01\""));
  EXPECT_TRUE(matches(schema("^[^x]$"), R"("\"")"));
}

TEST(RegexTest, ChoicesAreTheirTextsExactly) {
  const Grammar grammar = compile_choice({"yes", "no", "maybe so", "ye"});
  for (const char* text : {"yes", "no", "maybe so", "ye"}) EXPECT_TRUE(matches(grammar, text)) << text;
  for (const char* text : {"y", "yess", "maybe", ""}) EXPECT_FALSE(matches(grammar, text)) << text;
  EXPECT_EQ(error_text<RegexError>([] { compile_choice({}); }),
            "the list of choices is empty; fix: send at least one text to choose from");
}

TEST(RegexTest, RefusesWhatItCannotFollowNamingItAndWhere) {
  auto refusal = [](const std::string& pattern) { return error_text<RegexError>([&] { compile_regex(pattern); }); };
  const std::string tail =
      ", which graphed cannot follow; fix: rewrite the pattern without it (docs/serving.md lists "
      "the supported syntax)";
  EXPECT_EQ(refusal("(a)\\1"), "the regular expression '(a)\\1' has the backreference '\\1' at character 5" + tail);
  EXPECT_EQ(refusal("a(?=b)"),
            "the regular expression 'a(?=b)' has a lookaround or flag group '(?=' (lookarounds "
            "and flags cannot be followed token by token) at character 3" +
                tail);
  EXPECT_EQ(refusal("a\\bc"),
            "the regular expression 'a\\bc' has the word boundary '\\b' (an assertion, which "
            "cannot be followed token by token) at character 3" +
                tail);
  EXPECT_EQ(refusal("a^b"),
            "the regular expression 'a^b' has the anchor '^' inside the pattern (anchors are "
            "supported at the start and end of a top-level alternative only) at character 2" +
                tail);
  EXPECT_EQ(refusal("(ab"), "the regular expression '(ab' has a '(' that is never closed at character 3" + tail);
  EXPECT_EQ(refusal("ab)"), "the regular expression 'ab)' has a ')' with no '(' before it at character 2" + tail);
  EXPECT_EQ(refusal("[b-a]"), "the regular expression '[b-a]' has the range 'b-a' out of order at character 4" + tail);
  EXPECT_EQ(refusal("*a"),
            "the regular expression '*a' has the quantifier '*' with nothing before it to repeat at "
            "character 1" +
                tail);
  EXPECT_EQ(refusal("a**"),
            "the regular expression 'a**' has the quantifier '*' right after another at character 2" + tail);
  EXPECT_EQ(refusal("\\p{L}"), "the regular expression '\\p{L}' has the escape '\\p' at character 2" + tail);
  EXPECT_EQ(refusal("a{3,2}"),
            "the regular expression 'a{3,2}' has the quantifier {3,2} whose bounds are out of "
            "order at character 6" +
                tail);
  EXPECT_EQ(refusal("[a"), "the regular expression '[a' has a '[' that is never closed at character 2" + tail);
  EXPECT_EQ(refusal("[a-"), "the regular expression '[a-' has a '[' that is never closed at character 3" + tail);
  EXPECT_EQ(refusal("[\\d"), "the regular expression '[\\d' has a '[' that is never closed at character 3" + tail);
  EXPECT_EQ(refusal("a(?"),
            "the regular expression 'a(?' has a lookaround or flag group '(?' (lookarounds and flags "
            "cannot be followed token by token) at character 3" +
                tail);
  EXPECT_EQ(refusal("\\uD83D"),
            "the regular expression '\\uD83D' has a lone surrogate escape (U+D83D is no "
            "character) at character 6" +
                tail);
  EXPECT_EQ(refusal("\\01"), "the regular expression '\\01' has the octal escape '\\01' at character 2" + tail);
  EXPECT_EQ(refusal("a{60000}b{50000}"),
            "the regular expression 'a{60000}b{50000}' has repetition counts adding up "
            "past graphed's limit of 100000 at character 16" +
                tail);
  EXPECT_EQ(refusal("a{100001}"),
            "the regular expression 'a{100001}' has a repetition count over graphed's limit of "
            "100000 at character 8" +
                tail);
}

}  // namespace
}  // namespace graphed::grammar
