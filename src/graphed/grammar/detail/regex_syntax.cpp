// grammar/detail/regex_syntax.cpp — CodePointSet and a recursive-descent parser of the supported regex subset.
#include "graphed/grammar/detail/regex_syntax.h"

#include <algorithm>

#include "graphed/util/error.h"
#include "graphed/util/utf8.h"

namespace graphed::grammar::detail {

namespace {

constexpr std::uint32_t kSurrogateFirst = 0xD800;
constexpr std::uint32_t kSurrogateLast = 0xDFFF;

}  // namespace

CodePointSet& CodePointSet::add(std::uint32_t first, std::uint32_t last) {
  last = std::min(last, kLast);
  if (first > last) return *this;
  if (first < kSurrogateFirst && last > kSurrogateLast) {  // keep surrogates out
    add(first, kSurrogateFirst - 1);
    return add(kSurrogateLast + 1, last);
  }
  if (first >= kSurrogateFirst && last <= kSurrogateLast) return *this;
  if (first >= kSurrogateFirst && first <= kSurrogateLast) first = kSurrogateLast + 1;
  if (last >= kSurrogateFirst && last <= kSurrogateLast) last = kSurrogateFirst - 1;
  ranges_.push_back({first, last});
  std::sort(ranges_.begin(), ranges_.end(), [](const Range& a, const Range& b) { return a.first < b.first; });
  std::vector<Range> merged;
  for (const Range& range : ranges_) {
    if (!merged.empty() && range.first <= merged.back().last + 1) {
      merged.back().last = std::max(merged.back().last, range.last);
    } else {
      merged.push_back(range);
    }
  }
  ranges_ = std::move(merged);
  return *this;
}

CodePointSet& CodePointSet::add(const CodePointSet& other) {
  for (const Range& range : other.ranges_) add(range.first, range.last);
  return *this;
}

CodePointSet CodePointSet::complement() const {
  CodePointSet result;
  std::uint32_t next = 0;
  for (const Range& range : ranges_) {
    if (range.first > next) result.add(next, range.first - 1);
    next = range.last + 1;
  }
  if (next <= kLast) result.add(next, kLast);
  return result;
}

bool CodePointSet::contains(std::uint32_t code_point) const {
  for (const Range& range : ranges_) {
    if (code_point >= range.first && code_point <= range.last) return true;
  }
  return false;
}

bool RegexNode::nullable() const {
  switch (kind) {
    case Kind::kCharacters: return false;
    case Kind::kSequence:
      return std::all_of(children.begin(), children.end(), [](const RegexNode& child) { return child.nullable(); });
    case Kind::kAlternatives:
      return std::any_of(children.begin(), children.end(), [](const RegexNode& child) { return child.nullable(); });
    case Kind::kRepeat: return minimum == 0 || children.front().nullable();
  }
  return false;
}

namespace {

using Kind = RegexNode::Kind;

std::vector<std::uint32_t> code_points_of(const CodePoints& decoded) {
  return std::vector<std::uint32_t>(decoded.code_points.begin(), decoded.code_points.end());
}

RegexNode characters(const CodePointSet& set) {
  RegexNode node;
  node.kind = Kind::kCharacters;
  node.characters = set;
  return node;
}

CodePointSet single(std::uint32_t code_point) { return CodePointSet().add(code_point, code_point); }

CodePointSet digits() { return CodePointSet().add('0', '9'); }

CodePointSet word_characters() { return CodePointSet().add('a', 'z').add('A', 'Z').add('0', '9').add('_', '_'); }

// ECMAScript's \s: white space and line terminators.
CodePointSet spaces() {
  CodePointSet set;
  for (std::uint32_t code_point : {0x09u, 0x0Au, 0x0Bu, 0x0Cu, 0x0Du, 0x20u, 0xA0u, 0x1680u, 0x2028u, 0x2029u, 0x202Fu,
                                   0x205Fu, 0x3000u, 0xFEFFu}) {
    set.add(code_point, code_point);
  }
  return set.add(0x2000, 0x200A);
}

// ECMAScript's `.`: any character but the line terminators.
CodePointSet dot() { return CodePointSet().add(0x0A, 0x0A).add(0x0D, 0x0D).add(0x2028, 0x2029).complement(); }

class RegexParser {
 public:
  explicit RegexParser(std::string_view pattern)
      : pattern_(pattern), text_(code_points_of(graphed::decode_utf8(pattern, "the regular expression"))) {}

  std::vector<RegexBranch> parse() {
    std::vector<RegexBranch> branches;
    do {
      RegexBranch branch;
      branch.anchored_start = take('^');
      branch.body = parse_sequence(/*top_level=*/true);
      branch.anchored_end = take('$');
      branches.push_back(std::move(branch));
    } while (take('|'));
    if (!at_end()) fail(peek() == ')' ? "a ')' with no '(' before it" : "'" + shown(peek()) + "' here");
    return branches;
  }

 private:
  RegexNode parse_alternatives() {
    RegexNode node;
    node.kind = Kind::kAlternatives;
    do {
      node.children.push_back(parse_sequence(/*top_level=*/false));
    } while (take('|'));
    if (node.children.size() == 1) return std::move(node.children.front());
    return node;
  }

  RegexNode parse_sequence(bool top_level) {
    RegexNode node;
    node.kind = Kind::kSequence;
    while (!at_end() && peek() != '|' && peek() != ')') {
      if (peek() == '$' && top_level && (at_ + 1 == text_.size() || text_[at_ + 1] == '|')) break;
      RegexNode atom = parse_atom();
      node.children.push_back(parse_quantifiers(std::move(atom)));
    }
    return node;
  }

  RegexNode parse_atom() {
    if (peek() == '{' && quantifier_follows()) fail("the quantifier '{' with nothing before it to repeat");
    const std::uint32_t code_point = next();
    switch (code_point) {
      case '(': return parse_group();
      case '[': return characters(parse_class());
      case '.': return characters(dot());
      case '\\': return characters(parse_escape(/*in_class=*/false));
      case '^':
      case '$':
        fail("the anchor '" + shown(code_point) +
             "' inside the pattern (anchors are supported at the start and end of a top-level alternative only)");
      case '*':
      case '+':
      case '?': fail("the quantifier '" + shown(code_point) + "' with nothing before it to repeat");
      default: return characters(single(code_point));
    }
  }

  RegexNode parse_group() {
    if (take('?')) {
      if (take(':')) {
      } else if (!at_end() && peek() == '<' && at_ + 1 < text_.size() && text_[at_ + 1] != '=' &&
                 text_[at_ + 1] != '!') {
        while (!at_end() && next() != '>') {
        }
      } else {
        fail("a lookaround or flag group '(?" + (at_end() ? std::string() : shown(peek())) +
             "' (lookarounds and flags cannot be followed token by token)");
      }
    }
    RegexNode inside = parse_alternatives();
    if (!take(')')) fail("a '(' that is never closed");
    return inside;
  }

  CodePointSet parse_class() {
    const bool negated = take('^');
    if (negated && take(']')) return CodePointSet().add(0, CodePointSet::kLast);  // [^]: any character at all
    CodePointSet set;
    bool first = true;
    while (!at_end() && (peek() != ']' || first)) {
      if (first && peek() == ']') fail("an empty class '[]' (it matches nothing)");
      first = false;
      const CodePointSet low = class_atom();
      if (!at_end() && peek() == '-' && at_ + 1 < text_.size() && text_[at_ + 1] != ']') {
        next();
        const CodePointSet high = class_atom();
        if (low.ranges().size() != 1 || high.ranges().size() != 1 ||
            low.ranges().front().first != low.ranges().front().last ||
            high.ranges().front().first != high.ranges().front().last) {
          fail("a range in a class whose end is a class escape such as \\d");
        }
        const std::uint32_t from = low.ranges().front().first;
        const std::uint32_t to = high.ranges().front().first;
        if (from > to) fail("the range '" + shown(from) + "-" + shown(to) + "' out of order");
        set.add(from, to);
      } else {
        set.add(low);
      }
    }
    if (!take(']')) fail("a '[' that is never closed");
    if (negated) set = set.complement();
    if (set.empty()) fail("a class that matches no character");
    return set;
  }

  CodePointSet class_atom() {
    const std::uint32_t code_point = next();
    if (code_point == '\\') return parse_escape(/*in_class=*/true);
    return single(code_point);
  }

  CodePointSet parse_escape(bool in_class) {
    if (at_end()) fail("a '\\' at the end of the pattern");
    const std::uint32_t code_point = next();
    switch (code_point) {
      case 'd': return digits();
      case 'D': return digits().complement();
      case 'w': return word_characters();
      case 'W': return word_characters().complement();
      case 's': return spaces();
      case 'S': return spaces().complement();
      case 'n': return single('\n');
      case 'r': return single('\r');
      case 't': return single('\t');
      case 'f': return single('\f');
      case 'v': return single('\v');
      case '0':
        if (!at_end() && peek() >= '0' && peek() <= '9') fail("the octal escape '\\0" + shown(peek()) + "'");
        return single(0);
      case 'x': return single(hex_digits(2, "\\x"));
      case 'u': return single(unicode_character());
      case 'b':
        if (in_class) return single('\b');
        fail("the word boundary '\\b' (an assertion, which cannot be followed token by token)");
      default: break;
    }
    if (code_point >= '1' && code_point <= '9') fail("the backreference '\\" + shown(code_point) + "'");
    const bool letter_or_digit = (code_point >= 'a' && code_point <= 'z') || (code_point >= 'A' && code_point <= 'Z') ||
                                 (code_point >= '0' && code_point <= '9');
    if (letter_or_digit) fail("the escape '\\" + shown(code_point) + "'");
    return single(code_point);  // escaped punctuation stands for itself
  }

  /// A \u escape's character: a high surrogate followed by \u of a low one is one character (as in JavaScript); a
  /// lone surrogate is no character, and refused.
  std::uint32_t unicode_character() {
    const std::uint32_t value = unicode_escape();
    const bool high = value >= 0xD800 && value <= 0xDBFF;
    if (high && at_ + 1 < text_.size() && text_[at_] == '\\' && text_[at_ + 1] == 'u') {
      const std::size_t mark = at_;
      at_ += 2;
      const std::uint32_t low = unicode_escape();
      if (low >= 0xDC00 && low <= 0xDFFF) return 0x10000 + ((value - 0xD800) << 10) + (low - 0xDC00);
      at_ = mark;
    }
    if (value >= 0xD800 && value <= 0xDFFF) fail("a lone surrogate escape (U+" + hex(value) + " is no character)");
    return value;
  }

  static std::string hex(std::uint32_t value) {
    const char* digits = "0123456789ABCDEF";
    std::string text;
    for (int shift = 12; shift >= 0; shift -= 4) text += digits[(value >> shift) & 15];
    return text;
  }

  std::uint32_t unicode_escape() {
    if (!take('{')) return hex_digits(4, "\\u");
    std::uint32_t value = 0;
    int count = 0;
    while (!at_end() && peek() != '}') {
      value = value * 16 + hex_value(next(), "\\u{...}");
      if (++count > 6 || value > CodePointSet::kLast) fail("a '\\u{...}' past U+10FFFF");
    }
    if (count == 0 || !take('}')) fail("a '\\u{' without hex digits and a closing '}'");
    return value;
  }

  std::uint32_t hex_digits(int count, const std::string& escape) {
    std::uint32_t value = 0;
    for (int index = 0; index < count; ++index) {
      if (at_end()) fail("'" + escape + "' needs " + std::to_string(count) + " hex digits");
      value = value * 16 + hex_value(next(), escape);
    }
    return value;
  }

  std::uint32_t hex_value(std::uint32_t code_point, const std::string& escape) {
    if (code_point >= '0' && code_point <= '9') return code_point - '0';
    if (code_point >= 'a' && code_point <= 'f') return code_point - 'a' + 10;
    if (code_point >= 'A' && code_point <= 'F') return code_point - 'A' + 10;
    fail("'" + escape + "' followed by '" + shown(code_point) + "', not a hex digit");
  }

  RegexNode parse_quantifiers(RegexNode atom) {
    while (!at_end()) {
      int minimum = 0;
      int maximum = -1;
      if (take('*')) {
      } else if (take('+')) {
        minimum = 1;
      } else if (take('?')) {
        maximum = 1;
      } else if (peek() == '{' && quantifier_follows()) {
        next();
        minimum = count();
        maximum = minimum;
        if (take(',')) maximum = peek() == '}' ? -1 : count();
        next();  // '}', checked by quantifier_follows()
        if (maximum >= 0 && maximum < minimum)
          fail("the quantifier {" + std::to_string(minimum) + "," + std::to_string(maximum) +
               "} whose bounds are out of order");
      } else {
        break;
      }
      take('?');  // lazy: the same set of strings
      if (!at_end() && (peek() == '*' || peek() == '+' || peek() == '?')) {
        fail("the quantifier '" + shown(peek()) + "' right after another");
      }
      counted_ += maximum >= 0 ? maximum : minimum + 1;  // what the grammar spends on the repetition
      if (counted_ > kMaxRegexCount) {
        fail("repetition counts adding up past graphed's limit of " + std::to_string(kMaxRegexCount));
      }
      RegexNode repeat;
      repeat.kind = Kind::kRepeat;
      repeat.minimum = minimum;
      repeat.maximum = maximum;
      repeat.children.push_back(std::move(atom));
      atom = std::move(repeat);
    }
    return atom;
  }

  /// Whether `{` at the cursor starts {n}, {n,} or {n,m}.
  bool quantifier_follows() const {
    std::size_t at = at_ + 1;
    auto digits_from = [&](std::size_t& cursor) {
      const std::size_t start = cursor;
      while (cursor < text_.size() && text_[cursor] >= '0' && text_[cursor] <= '9') ++cursor;
      return cursor > start;
    };
    if (!digits_from(at)) return false;
    if (at < text_.size() && text_[at] == ',') {
      ++at;
      digits_from(at);
    }
    return at < text_.size() && text_[at] == '}';
  }

  int count() {
    long value = 0;
    while (!at_end() && peek() >= '0' && peek() <= '9') {
      value = value * 10 + static_cast<long>(next() - '0');
      if (value > kMaxRegexCount) {
        fail("a repetition count over graphed's limit of " + std::to_string(kMaxRegexCount));
      }
    }
    return static_cast<int>(value);
  }

  [[noreturn]] void fail(const std::string& what) const {
    throw Error("the regular expression '" + std::string(pattern_) + "' has " + what + " at character " +
                std::to_string(at_) +
                ", which graphed cannot follow; fix: rewrite the pattern without it "
                "(docs/serving.md lists the supported syntax)");
  }

  static std::string shown(std::uint32_t code_point) { return utf8_of(static_cast<char32_t>(code_point)); }

  bool at_end() const { return at_ >= text_.size(); }
  std::uint32_t peek() const { return text_[at_]; }
  std::uint32_t next() { return text_[at_++]; }
  bool take(std::uint32_t code_point) {
    if (at_end() || peek() != code_point) return false;
    ++at_;
    return true;
  }

  std::string_view pattern_;
  std::vector<std::uint32_t> text_;
  std::size_t at_ = 0;
  long counted_ = 0;  // the repetitions' counts so far, against kMaxRegexCount
};

}  // namespace

std::vector<RegexBranch> parse_regex(std::string_view pattern) { return RegexParser(pattern).parse(); }

}  // namespace graphed::grammar::detail
