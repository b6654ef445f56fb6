// jinja/lexer.cpp — tokenize(): scans text for {{ }}, {% %} and {# #}, applies jinja2's whitespace
// control around each tag (trim_blocks, lstrip_blocks, '-' and '+'), then splits tag contents into
// names, literals and operators. Brackets nest, so "}}" inside a dict literal does not end a tag.
#include "graphed/jinja/lexer.h"

#include <algorithm>
#include <cctype>

#include "graphed/jinja/python_text.h"
#include "graphed/jinja/template.h"
#include "graphed/util/utf8.h"

namespace graphed::jinja {
namespace {

/// Newlines as jinja2 normalizes them ("\r\n" and "\r" -> "\n"), one trailing newline dropped.
std::string normalize_source(const std::string& source) {
  std::string out;
  out.reserve(source.size());
  for (std::size_t i = 0; i < source.size(); ++i) {
    if (source[i] == '\r') {
      out += '\n';
      if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
    } else {
      out += source[i];
    }
  }
  if (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

bool is_tag_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

bool is_name_start(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_' || (c & 0x80); }

bool is_name_part(char c) { return is_name_start(c) || std::isdigit(static_cast<unsigned char>(c)); }

bool is_all_whitespace(const std::string& text) {
  const std::u32string points = code_points_of(text);
  return !points.empty() && std::all_of(points.begin(), points.end(), is_python_whitespace);
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

class Lexer {
 public:
  explicit Lexer(const std::string& source) : source_(normalize_source(source)) {
    line_starts_.push_back(0);
    for (std::size_t i = 0; i < source_.size(); ++i) {
      if (source_[i] == '\n') line_starts_.push_back(i + 1);
    }
  }

  std::vector<Token> run() {
    while (position_ < source_.size()) {
      const std::size_t tag = find_tag_start(position_);
      if (tag == std::string::npos) {
        emit_text(position_, source_.substr(position_));
        position_ = source_.size();
        break;
      }
      lex_tag_with_preceding_text(tag);
    }
    tokens_.push_back(Token{TokenKind::kEnd, "", location_of(source_.size())});
    return std::move(tokens_);
  }

 private:
  /// Line and column of a byte offset. Tokens come in source order, so the column is counted on from
  /// the previous token's when both are on one line (long one-line templates stay linear).
  SourceLocation location_of(std::size_t offset) const {
    const auto after = std::upper_bound(line_starts_.begin(), line_starts_.end(), offset);
    const std::size_t line_start = *(after - 1);
    std::size_t from = line_start;
    std::size_t column = 1;
    if (cached_line_start_ == line_start && cached_offset_ <= offset) {
      from = cached_offset_;
      column = cached_column_;
    }
    column += code_point_count(std::string_view(source_).substr(from, offset - from));
    cached_line_start_ = line_start;
    cached_offset_ = offset;
    cached_column_ = column;
    return SourceLocation{static_cast<int>(after - line_starts_.begin()), static_cast<int>(column)};
  }

  [[noreturn]] void fail(const std::string& problem, const std::string& fix, std::size_t offset) const {
    const SourceLocation location = location_of(offset);
    throw TemplateError(problem, fix, location.line, location.column);
  }

  std::size_t find_tag_start(std::size_t from) const {
    for (std::size_t at = source_.find('{', from); at != std::string::npos; at = source_.find('{', at + 1)) {
      if (at + 1 < source_.size() && (source_[at + 1] == '{' || source_[at + 1] == '%' || source_[at + 1] == '#')) {
        return at;
      }
    }
    return std::string::npos;
  }

  void emit_text(std::size_t offset, std::string text) {
    if (!text.empty()) tokens_.push_back(Token{TokenKind::kText, std::move(text), location_of(offset)});
  }

  /// Text before a tag, with the tag's strip sign ('-', '+' or 0) applied: '-' strips all trailing
  /// whitespace; otherwise lstrip_blocks drops spaces between a line start and a block or comment tag.
  std::string strip_before_tag(std::string text, char sign, bool is_variable) const {
    if (sign == '-') return python_strip(text, std::nullopt, StripSide::kRight);
    if (sign == '+' || is_variable) return text;
    const std::size_t line_start = text.rfind('\n') == std::string::npos ? 0 : text.rfind('\n') + 1;
    if ((line_start > 0 || line_starting_) && is_all_whitespace(text.substr(line_start))) text.resize(line_start);
    return text;
  }

  void lex_tag_with_preceding_text(std::size_t tag) {
    const char kind = source_[tag + 1];
    std::size_t inside = tag + 2;
    char sign = 0;
    if (inside < source_.size() && (source_[inside] == '-' || source_[inside] == '+')) sign = source_[inside++];
    const std::size_t raw_body = kind == '%' ? match_raw_begin(inside) : std::string::npos;
    emit_text(position_, strip_before_tag(source_.substr(position_, tag - position_), sign, kind == '{'));
    if (kind == '#') {
      lex_comment(tag, inside);
    } else if (raw_body != std::string::npos) {
      lex_raw(tag, raw_body);
    } else {
      lex_tag(kind, tag, inside);
    }
    line_starting_ = position_ > 0 && source_[position_ - 1] == '\n';
  }

  /// After a tag's end: '-' drops all whitespace that follows, '+' nothing, otherwise trim_blocks drops
  /// one newline after block tags and comments.
  void skip_after_tag(char sign, bool trims) {
    if (sign == '-') {
      const std::size_t kept =
          python_strip(std::string_view(source_).substr(position_), std::nullopt, StripSide::kLeft).size();
      position_ = source_.size() - kept;
    } else if (sign != '+' && trims && position_ < source_.size() && source_[position_] == '\n') {
      ++position_;
    }
  }

  void lex_comment(std::size_t tag, std::size_t inside) {
    const std::size_t end = source_.find("#}", inside);
    if (end == std::string::npos) fail("the comment is not closed", "end it with #}", tag);
    const char sign = (end > inside && (source_[end - 1] == '-' || source_[end - 1] == '+')) ? source_[end - 1] : 0;
    position_ = end + 2;
    skip_after_tag(sign, true);
  }

  /// For "{% raw %}" (the sign already skipped): the offset just past its "%}", else npos.
  std::size_t match_raw_begin(std::size_t at) const {
    while (at < source_.size() && is_tag_space(source_[at])) ++at;
    if (source_.compare(at, 3, "raw") != 0) return std::string::npos;
    at += 3;
    while (at < source_.size() && is_tag_space(source_[at])) ++at;
    if (source_.compare(at, 3, "-%}") == 0) return at + 3;
    if (source_.compare(at, 2, "%}") == 0) return at + 2;
    return std::string::npos;
  }

  void lex_raw(std::size_t tag, std::size_t body) {
    if (source_[body - 3] == '-') {  // "-%}" strips the whitespace that follows
      position_ = body;
      skip_after_tag('-', false);
      body = position_;
    }
    line_starting_ = body > 0 && source_[body - 1] == '\n';
    for (std::size_t at = source_.find("{%", body); at != std::string::npos; at = source_.find("{%", at + 2)) {
      std::size_t inside = at + 2;
      char sign = 0;
      if (inside < source_.size() && (source_[inside] == '-' || source_[inside] == '+')) sign = source_[inside++];
      while (inside < source_.size() && is_tag_space(source_[inside])) ++inside;
      if (source_.compare(inside, 6, "endraw") != 0) continue;
      inside += 6;
      while (inside < source_.size() && is_tag_space(source_[inside])) ++inside;
      char end_sign = 0;
      if (inside < source_.size() && (source_[inside] == '-' || source_[inside] == '+')) end_sign = source_[inside++];
      if (source_.compare(inside, 2, "%}") != 0) continue;
      emit_text(body, strip_before_tag(source_.substr(body, at - body), sign, false));
      position_ = inside + 2;
      skip_after_tag(end_sign, true);
      return;
    }
    fail("the raw block is not closed", "end it with {% endraw %}", tag);
  }

  void lex_tag(char kind, std::size_t tag, std::size_t inside) {
    const bool is_block = kind == '%';
    tokens_.push_back(Token{is_block ? TokenKind::kBlockBegin : TokenKind::kVariableBegin, "", location_of(tag)});
    position_ = inside;
    std::vector<std::size_t> open_brackets;  // offsets of the unclosed ( [ {
    while (true) {
      while (position_ < source_.size() && is_tag_space(source_[position_])) ++position_;
      if (position_ >= source_.size()) {
        fail(std::string("the ") + (is_block ? "block tag" : "expression") + " opened here is not closed",
             std::string("end it with ") + (is_block ? "%}" : "}}"), tag);
      }
      if (open_brackets.empty() && lex_tag_end(is_block)) return;
      lex_expression_token(open_brackets);
    }
  }

  bool lex_tag_end(bool is_block) {
    const char* end = is_block ? "%}" : "}}";
    const SourceLocation location = location_of(position_);
    const TokenKind kind = is_block ? TokenKind::kBlockEnd : TokenKind::kVariableEnd;
    for (const char sign : {'-', '+'}) {
      if (source_[position_] == sign && source_.compare(position_ + 1, 2, end) == 0 && (sign == '-' || is_block)) {
        tokens_.push_back(Token{kind, "", location});
        position_ += 3;
        skip_after_tag(sign, is_block);
        return true;
      }
    }
    if (source_.compare(position_, 2, end) != 0) return false;
    tokens_.push_back(Token{kind, "", location});
    position_ += 2;
    skip_after_tag(0, is_block);
    return true;
  }

  void lex_expression_token(std::vector<std::size_t>& open_brackets) {
    const std::size_t start = position_;
    const char c = source_[position_];
    if (is_name_start(c)) {
      while (position_ < source_.size() && is_name_part(source_[position_])) ++position_;
      tokens_.push_back(Token{TokenKind::kName, source_.substr(start, position_ - start), location_of(start)});
    } else if (std::isdigit(static_cast<unsigned char>(c))) {
      lex_number();
    } else if (c == '\'' || c == '"') {
      lex_string();
    } else {
      lex_operator(open_brackets);
    }
  }

  void lex_digits() {
    while (position_ < source_.size() && (std::isdigit(static_cast<unsigned char>(source_[position_])) ||
                                          (source_[position_] == '_' && position_ + 1 < source_.size() &&
                                           std::isdigit(static_cast<unsigned char>(source_[position_ + 1]))))) {
      ++position_;
    }
  }

  void lex_number() {
    const std::size_t start = position_;
    const bool after_dot = start > 0 && source_[start - 1] == '.';  // `items.0.1` is not a float
    if (source_[start] == '0' && start + 2 < source_.size() &&
        std::string("xXoObB").find(source_[start + 1]) != std::string::npos) {
      lex_prefixed_integer();
      return;
    }
    lex_digits();
    bool is_float = false;
    if (!after_dot && position_ + 1 < source_.size() && source_[position_] == '.' &&
        std::isdigit(static_cast<unsigned char>(source_[position_ + 1]))) {
      ++position_;
      lex_digits();
      is_float = true;
    }
    if (!after_dot && position_ < source_.size() && (source_[position_] == 'e' || source_[position_] == 'E')) {
      std::size_t at = position_ + 1;
      if (at < source_.size() && (source_[at] == '+' || source_[at] == '-')) ++at;
      if (at < source_.size() && std::isdigit(static_cast<unsigned char>(source_[at]))) {
        position_ = at;
        lex_digits();
        is_float = true;
      }
    }
    std::string digits = source_.substr(start, position_ - start);
    digits.erase(std::remove(digits.begin(), digits.end(), '_'), digits.end());
    tokens_.push_back(Token{is_float ? TokenKind::kFloat : TokenKind::kInteger, digits, location_of(start)});
  }

  void lex_prefixed_integer() {
    const std::size_t start = position_;
    const char base_letter = static_cast<char>(std::tolower(static_cast<unsigned char>(source_[start + 1])));
    const int base = base_letter == 'x' ? 16 : (base_letter == 'o' ? 8 : 2);
    position_ += 2;
    uint64_t number = 0;
    bool any = false;
    while (position_ < source_.size()) {
      const char c = source_[position_];
      const int digit = hex_value(c);
      if (c == '_') {
        ++position_;
        continue;
      }
      if (digit < 0 || digit >= base) break;
      number = number * static_cast<uint64_t>(base) + static_cast<uint64_t>(digit);
      any = true;
      ++position_;
    }
    if (!any) fail("the number has no digits after its base prefix", "write digits after 0x, 0o or 0b", start);
    tokens_.push_back(Token{TokenKind::kInteger, std::to_string(number), location_of(start)});
  }

  void lex_string() {
    const std::size_t start = position_;
    const char quote = source_[position_++];
    std::string raw;
    while (true) {
      if (position_ >= source_.size()) fail("the string is not closed", std::string("end it with ") + quote, start);
      const char c = source_[position_];
      if (c == quote) break;
      if (c == '\\' && position_ + 1 < source_.size()) {
        raw += c;
        ++position_;
      }
      raw += source_[position_++];
    }
    ++position_;
    tokens_.push_back(Token{TokenKind::kString, unescape(raw, start), location_of(start)});
  }

  /// Python's "unicode-escape" decoding of a string literal's body (non-ASCII text passes through).
  std::string unescape(const std::string& raw, std::size_t offset) const {
    std::string out;
    for (std::size_t i = 0; i < raw.size(); ++i) {
      if (raw[i] != '\\' || i + 1 >= raw.size()) {
        out += raw[i];
        continue;
      }
      const char e = raw[++i];
      switch (e) {
        case '\n': break;
        case '\\': out += '\\'; break;
        case '\'': out += '\''; break;
        case '"': out += '"'; break;
        case 'a': out += '\a'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'n': out += '\n'; break;
        case 'r': out += '\r'; break;
        case 't': out += '\t'; break;
        case 'v': out += '\v'; break;
        case 'x': append_utf8(out, hex_escape(raw, i, 2, offset)); break;
        case 'u': append_utf8(out, hex_escape(raw, i, 4, offset)); break;
        case 'U': append_utf8(out, hex_escape(raw, i, 8, offset)); break;
        default:
          if (e >= '0' && e <= '7') {
            char32_t code = static_cast<char32_t>(e - '0');
            for (int n = 0; n < 2 && i + 1 < raw.size() && raw[i + 1] >= '0' && raw[i + 1] <= '7'; ++n) {
              code = code * 8 + static_cast<char32_t>(raw[++i] - '0');
            }
            append_utf8(out, code);
          } else {
            out += '\\';
            out += e;
          }
      }
    }
    return out;
  }

  char32_t hex_escape(const std::string& raw, std::size_t& i, int digits, std::size_t offset) const {
    char32_t code = 0;
    for (int n = 0; n < digits; ++n) {
      const int digit = i + 1 < raw.size() ? hex_value(raw[i + 1]) : -1;
      if (digit < 0) {
        fail("the string has a truncated \\" + std::string(1, raw[i - static_cast<std::size_t>(n)]) + " escape",
             "write exactly " + std::to_string(digits) + " hex digits after it", offset);
      }
      code = code * 16 + static_cast<char32_t>(digit);
      ++i;
    }
    return code;
  }

  void lex_operator(std::vector<std::size_t>& open_brackets) {
    const std::size_t start = position_;
    static constexpr const char* kTwoCharacter[] = {"//", "**", "==", "!=", ">=", "<="};
    for (const char* op : kTwoCharacter) {
      if (source_.compare(start, 2, op) == 0) {
        tokens_.push_back(Token{TokenKind::kOperator, op, location_of(start)});
        position_ += 2;
        return;
      }
    }
    const char c = source_[start];
    if (std::string("+-/*%~[](){}><=.:|,;").find(c) == std::string::npos) {
      std::string shown = c & 0x80 ? std::string("non-ASCII character") : std::string("character '") + c + "'";
      fail("unexpected " + shown + " in a tag", "remove it, or quote it inside a string", start);
    }
    if (c == '(' || c == '[' || c == '{') open_brackets.push_back(start);
    if (c == ')' || c == ']' || c == '}') {
      if (open_brackets.empty())
        fail(std::string("unexpected '") + c + "'", "remove it, or add the opening bracket", start);
      const char opener = source_[open_brackets.back()];
      const char expected = opener == '(' ? ')' : (opener == '[' ? ']' : '}');
      if (c != expected) {
        const SourceLocation location = location_of(open_brackets.back());
        fail(std::string("unexpected '") + c + "', expected '" + expected + "' to close the '" + opener + "' at line " +
                 std::to_string(location.line) + ", column " + std::to_string(location.column),
             std::string("close it with '") + expected + "'", start);
      }
      open_brackets.pop_back();
    }
    tokens_.push_back(Token{TokenKind::kOperator, std::string(1, c), location_of(start)});
    ++position_;
  }

  std::string source_;
  std::vector<std::size_t> line_starts_;
  std::vector<Token> tokens_;
  std::size_t position_ = 0;
  bool line_starting_ = true;
  mutable std::size_t cached_line_start_ = std::string::npos;
  mutable std::size_t cached_offset_ = 0;
  mutable std::size_t cached_column_ = 1;
};

}  // namespace

std::vector<Token> tokenize(const std::string& source) { return Lexer(source).run(); }

}  // namespace graphed::jinja
