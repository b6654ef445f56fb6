// tests/jinja/lexer_test.cpp — tokenize() and the whitespace rules transformers renders with: trim_blocks,
// lstrip_blocks, '-' and '+' control, comments, raw blocks, the dropped trailing newline, CRLF; and the
// exact messages of lexical errors. Expected texts were checked against jinja2 3.1.6.
#include "graphed/jinja/lexer.h"

#include <gtest/gtest.h>

#include "error_text.h"
#include "graphed/jinja/template.h"

namespace graphed::jinja {
namespace {

using graphed::testing::error_text;

std::string render_text(const std::string& source) { return Template(source).render(nlohmann::ordered_json::object()); }

std::string tokenize_error(const std::string& source) {
  return error_text<TemplateError>([&] { tokenize(source); });
}

TEST(LexerTest, SplitsTagsIntoKindsWithLineAndColumn) {
  const std::vector<Token> tokens = tokenize("ab\n{{ x.y + 1.5 }}");
  ASSERT_EQ(tokens.size(), 9u);
  EXPECT_EQ(tokens[0].kind, TokenKind::kText);
  EXPECT_EQ(tokens[0].text, "ab\n");
  EXPECT_EQ(tokens[1].kind, TokenKind::kVariableBegin);
  EXPECT_EQ(tokens[1].location.line, 2);
  EXPECT_EQ(tokens[1].location.column, 1);
  EXPECT_EQ(tokens[2].kind, TokenKind::kName);
  EXPECT_EQ(tokens[2].text, "x");
  EXPECT_EQ(tokens[2].location.column, 4);
  EXPECT_EQ(tokens[3].text, ".");
  EXPECT_EQ(tokens[5].text, "+");
  EXPECT_EQ(tokens[6].kind, TokenKind::kFloat);
  EXPECT_EQ(tokens[6].text, "1.5");
  EXPECT_EQ(tokens[7].kind, TokenKind::kVariableEnd);
  EXPECT_EQ(tokens[8].kind, TokenKind::kEnd);
}

TEST(LexerTest, ColumnsCountCodePoints) {
  const std::vector<Token> tokens = tokenize("héllo {{ x }}");
  EXPECT_EQ(tokens[1].location.column, 7);
}

TEST(LexerTest, UnescapesStringsAsPython) {
  const std::vector<Token> tokens = tokenize(R"({{ 'a\nb\t\x41\u00e9\'\\\d' "it's" }})");
  EXPECT_EQ(tokens[1].kind, TokenKind::kString);
  EXPECT_EQ(tokens[1].text, "a\nb\tA\xC3\xA9'\\\\d");
  EXPECT_EQ(tokens[2].text, "it's");
}

TEST(LexerTest, ClosingBracesInsideADictDoNotEndTheTag) {
  EXPECT_EQ(render_text("{{ {'a': {'b': 1}}['a']['b'] }}"), "1");
}

TEST(LexerTest, AttributeNumbersAreNotFloats) {
  const std::vector<Token> tokens = tokenize("{{ x.0.1 }}");
  EXPECT_EQ(tokens[3].kind, TokenKind::kInteger);
  EXPECT_EQ(tokens[5].kind, TokenKind::kInteger);
}

TEST(WhitespaceTest, TrimBlocksDropsTheNewlineAfterABlockTagOnly) {
  EXPECT_EQ(render_text("{% if true %}\nx\n{% endif %}\ny"), "x\ny");
  EXPECT_EQ(render_text("{{ 1 }}\nx"), "1\nx");
}

TEST(WhitespaceTest, LstripBlocksDropsIndentationBeforeBlockTagsAndComments) {
  EXPECT_EQ(render_text("  {% if true %}\n  x\n  {% endif %}\n"), "  x\n");
  EXPECT_EQ(render_text("a {% if true %}b{% endif %}\n  {# c #}\nd"), "a bd");
  EXPECT_EQ(render_text("{{ 1 }}  {% if true %}x{% endif %}"), "1  x");
  EXPECT_EQ(render_text("  {{ 1 }}"), "  1");
}

TEST(WhitespaceTest, MinusStripsAllWhitespaceOnItsSide) {
  EXPECT_EQ(render_text("a\n  {{- 1 -}}\n  b"), "a1b");
  EXPECT_EQ(render_text("{%- for m in ['a', 'b'] -%}\n  {{- m -}}\n{%- endfor -%}\n"), "ab");
  EXPECT_EQ(render_text("line1\n    {%- if true %}\n    inner\n    {%- endif %}\nend\n"), "line1    innerend");
}

TEST(WhitespaceTest, PlusKeepsWhitespace) { EXPECT_EQ(render_text("x  {%+ if true %}y{% endif +%}\nz"), "x  y\nz"); }

TEST(WhitespaceTest, RawBlocksKeepTagsAsText) {
  EXPECT_EQ(render_text("{% raw %}{{ a }}{% endraw %}\n"), "{{ a }}");
  EXPECT_EQ(render_text("  {% raw %} {{ a }}\n{% endraw %}\nq"), " {{ a }}\nq");
  EXPECT_EQ(render_text("{%- raw -%}  {% x %}  {%- endraw %}"), "{% x %}");
}

TEST(WhitespaceTest, OneTrailingNewlineIsDroppedAndCrLfBecomesLf) {
  EXPECT_EQ(render_text("a\n"), "a");
  EXPECT_EQ(render_text("a\n\n"), "a\n");
  EXPECT_EQ(render_text("{% if true %}\r\nwin\r\n{% endif %}\r\n"), "win\n");
}

TEST(LexerTest, ErrorsNameTheLineColumnAndFix) {
  EXPECT_EQ(tokenize_error("a\n  {{ \"abc }}"),
            "template line 2, column 6: the string is not closed; fix: end it with \"");
  EXPECT_EQ(tokenize_error("{# open"), "template line 1, column 1: the comment is not closed; fix: end it with #}");
  EXPECT_EQ(tokenize_error("x\n{% if"),
            "template line 2, column 1: the block tag opened here is not closed; fix: end it with %}");
  EXPECT_EQ(tokenize_error("{% raw %}x"),
            "template line 1, column 1: the raw block is not closed; fix: end it with {% endraw %}");
  EXPECT_EQ(tokenize_error("{{ (1 }}"),
            "template line 1, column 7: unexpected '}', expected ')' to close the '(' at line 1, column 4; fix: close "
            "it with ')'");
  EXPECT_EQ(
      tokenize_error("{{ a ? b }}"),
      "template line 1, column 6: unexpected character '?' in a tag; fix: remove it, or quote it inside a string");
  EXPECT_EQ(
      tokenize_error("{{ '\\x4' }}"),
      "template line 1, column 4: the string has a truncated \\x escape; fix: write exactly 2 hex digits after it");
}

}  // namespace
}  // namespace graphed::jinja
