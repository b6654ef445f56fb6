// grammar/grammar.h — Grammar: a context-free grammar over bytes (rules of alternatives, each a sequence of
// byte sets and rule references), its builder helpers and its validation. Torch-free; the JSON schema
// compiler (json_schema.h) builds one, the matcher (matcher.h) runs it. Nothing here knows about tokens.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace graphed::grammar {

/// A set of bytes: one literal byte, a class like [a-z0-9_], or a negated class like [^"\\].
class ByteSet {
 public:
  ByteSet() = default;
  static ByteSet of(std::uint8_t byte);
  /// The bytes first..last, both included.
  static ByteSet range(std::uint8_t first, std::uint8_t last);

  ByteSet& add(std::uint8_t byte);
  ByteSet& add_range(std::uint8_t first, std::uint8_t last);
  ByteSet& add(const ByteSet& other);
  /// Every byte not in this set (for "any string character but these").
  ByteSet complement() const;

  bool contains(std::uint8_t byte) const { return (words_[byte >> 6] >> (byte & 63)) & 1u; }
  bool empty() const;
  std::size_t size() const;
  bool operator==(const ByteSet& other) const { return words_ == other.words_; }

 private:
  std::array<std::uint64_t, 4> words_{};
};

/// One element of an alternative: a byte set (rule < 0) or a reference to a rule by index.
struct Element {
  ByteSet bytes;
  int rule = -1;

  bool is_rule() const { return rule >= 0; }
  static Element of_bytes(const ByteSet& bytes) { return Element{bytes, -1}; }
  static Element of_byte(std::uint8_t byte) { return Element{ByteSet::of(byte), -1}; }
  static Element of_rule(int rule) { return Element{ByteSet(), rule}; }
};

using Sequence = std::vector<Element>;

/// A named rule: it matches any one of its alternatives. An empty alternative matches the empty string.
struct Rule {
  std::string name;
  std::vector<Sequence> alternatives;
};

/// The elements of `text`, one byte each.
Sequence literal(std::string_view text);
/// The sequences one after another.
Sequence concat(const std::vector<Sequence>& parts);

/// A grammar: rules by index and a root rule. Rules may be declared first and given alternatives later,
/// so that recursive rules (a JSON value inside an array) can refer to themselves.
///
/// The helpers add rules and return a reference to the new rule as one Element. Repetitions recurse on
/// the right (R -> E R | empty), which the matcher runs in constant stack depth; bounded repetition
/// {m,n} costs m references plus n-m small rules, never a copy of the repeated sequence per count.
class Grammar {
 public:
  /// A new rule with no alternatives yet; returns its index.
  int declare_rule(std::string name);
  void add_alternative(int rule, Sequence sequence);
  /// A new rule with these alternatives; returns its index.
  int add_rule(std::string name, std::vector<Sequence> alternatives);

  /// sequence | empty.
  Element optional(const Sequence& sequence, const std::string& name = "optional");
  /// sequence repeated zero or more times.
  Element zero_or_more(const Sequence& sequence, const std::string& name = "star");
  /// sequence repeated one or more times.
  Element one_or_more(const Sequence& sequence, const std::string& name = "plus");
  /// sequence repeated between minimum and maximum times; maximum < 0 means no upper bound.
  Element repeat(const Sequence& sequence, int minimum, int maximum, const std::string& name = "repeat");
  /// Any one of the alternatives.
  Element choice(std::vector<Sequence> alternatives, const std::string& name = "choice");

  void set_root(int rule) { root_ = rule; }
  int root() const { return root_; }
  const Rule& rule(int index) const { return rules_.at(static_cast<std::size_t>(index)); }
  int rule_count() const { return static_cast<int>(rules_.size()); }

  /// Whether the rule can match the empty string.
  bool is_nullable(int rule) const;

  /// Checks the grammar is usable by the matcher: a root is set, every referenced rule exists and has at
  /// least one alternative, no byte set is empty, and no rule is left-recursive (reaches itself without
  /// consuming a byte). Throws an internal error otherwise: grammars come from graphed's own compilers.
  void validate() const;

  /// A readable listing, one rule a line ("value ::= object | array | ..."), for tests and debugging.
  std::string to_string() const;

 private:
  /// The sequence as one element: itself when it is one element, else a reference to a new rule.
  Element as_element(const Sequence& sequence, const std::string& name);
  std::vector<bool> nullable_rules() const;

  std::vector<Rule> rules_;
  int root_ = -1;
};

}  // namespace graphed::grammar
