// jinja/lexer.h — template source -> tokens, applying jinja2's whitespace rules as transformers sets
// them: trim_blocks, lstrip_blocks, '-'/'+' control, comments dropped, {% raw %} kept as text, newlines
// normalized to "\n" and one trailing newline dropped (keep_trailing_newline=False).
#pragma once

#include <string>
#include <vector>

namespace graphed::jinja {

/// A position in the template: 1-based line and column (column counts code points).
struct SourceLocation {
  int line = 0;
  int column = 0;
};

enum class TokenKind {
  kText,           // literal template text (whitespace control already applied)
  kVariableBegin,  // {{
  kVariableEnd,    // }}
  kBlockBegin,     // {%
  kBlockEnd,       // %}
  kName,           // identifier or keyword
  kString,         // string literal, `text` unescaped
  kInteger,        // integer literal, `text` holds the digits without '_'
  kFloat,          // float literal, `text` holds the digits without '_'
  kOperator,       // + - * / // % ** ~ == != < <= > >= = . : | , ( ) [ ] { }
  kEnd,            // end of the template
};

struct Token {
  TokenKind kind = TokenKind::kEnd;
  std::string text;
  SourceLocation location;
};

/// Splits a template into tokens. Throws TemplateError (with the line and column) for an unclosed tag,
/// comment or string, a bad escape or an unexpected character.
std::vector<Token> tokenize(const std::string& source);

}  // namespace graphed::jinja
