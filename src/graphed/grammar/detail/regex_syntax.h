// grammar/detail/regex_syntax.h — a regular expression's syntax tree over Unicode code points, and its parser
// (the ECMAScript subset that JSON schema's `pattern` and vLLM's guided_regex use in practice). The tree is turned
// into grammar rules by grammar/regex.h; nothing here knows bytes or grammars.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace graphed::grammar::detail {

/// A set of code points, as sorted disjoint ranges. Surrogates (U+D800..U+DFFF) are never members: they are not
/// characters, so neither UTF-8 nor a JSON parser accepts them alone.
class CodePointSet {
 public:
  struct Range {
    std::uint32_t first;
    std::uint32_t last;
  };
  static constexpr std::uint32_t kLast = 0x10FFFF;

  CodePointSet& add(std::uint32_t first, std::uint32_t last);
  CodePointSet& add(const CodePointSet& other);
  /// Every character not in this set.
  CodePointSet complement() const;
  bool empty() const { return ranges_.empty(); }
  bool contains(std::uint32_t code_point) const;
  const std::vector<Range>& ranges() const { return ranges_; }

 private:
  std::vector<Range> ranges_;
};

/// A node of the tree: characters (one of a set), a sequence, alternatives, or a repetition of one child.
struct RegexNode {
  enum class Kind { kCharacters, kSequence, kAlternatives, kRepeat };
  Kind kind = Kind::kSequence;  ///< an empty sequence matches the empty string
  CodePointSet characters;
  std::vector<RegexNode> children;
  int minimum = 0;
  int maximum = -1;  ///< -1: no upper bound

  /// Whether the node can match the empty string.
  bool nullable() const;
};

/// One top-level alternative, with whether it was anchored: `^` at its start, `$` at its end.
struct RegexBranch {
  RegexNode body;
  bool anchored_start = false;
  bool anchored_end = false;
};

/// Repetition counts above this, alone or added up over a pattern, are refused, as the schema compiler's lengths are.
constexpr int kMaxRegexCount = 100000;

/// Parses `pattern` (UTF-8). Supported: literals; `.` (any character but line terminators); classes `[...]`,
/// `[^...]` with ranges and escapes, `[^]` (any character); `\d \D \w \W \s \S`; escapes of punctuation, `\n \r \t \f
/// \v \0`, `\xHH`,
/// `\uHHHH` (a surrogate pair of them one character), `\u{H...}`; groups `(...)`, `(?:...)`, `(?<name>...)`; `|`; `* +
/// ? {n} {n,} {n,m}`, lazy or not (the same language); `^` and `$` at the start and end of a top-level alternative.
/// Everything else (backreferences, lookaround, `\b`, `\p{...}`, flags, anchors elsewhere) throws graphed::Error naming
/// what and where, with a fix.
std::vector<RegexBranch> parse_regex(std::string_view pattern);

}  // namespace graphed::grammar::detail
