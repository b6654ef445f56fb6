// grammar/regex.cpp — a regex's syntax tree (detail/regex_syntax.h) turned into grammar rules: a set of code
// points becomes byte sets of UTF-8 sequences (or JSON's escapes), a repetition the grammar's bounded repeat.
#include "graphed/grammar/regex.h"

#include <optional>
#include <utility>

#include "graphed/grammar/detail/regex_syntax.h"
#include "graphed/util/utf8.h"

namespace graphed::grammar {

namespace {

using detail::CodePointSet;
using detail::RegexNode;
using Kind = RegexNode::Kind;

// The UTF-8 encodings of the code points first..last as sequences of byte ranges: the range is split where the
// encoded length changes and where a continuation byte would not run over its whole 0x80..0xBF, until the first
// and last code point's bytes bound every code point's bytes position by position.
void add_utf8_ranges(std::uint32_t first, std::uint32_t last, std::vector<Sequence>& out) {
  for (std::uint32_t bound : {0x7Fu, 0x7FFu, 0xFFFFu}) {
    if (first <= bound && last > bound) {
      add_utf8_ranges(first, bound, out);
      return add_utf8_ranges(bound + 1, last, out);
    }
  }
  for (int continuation = 1; continuation < 4; ++continuation) {
    const std::uint32_t low_bits = (1u << (6 * continuation)) - 1;
    if ((first & ~low_bits) == (last & ~low_bits)) continue;
    if ((first & low_bits) != 0) {
      add_utf8_ranges(first, first | low_bits, out);
      return add_utf8_ranges((first | low_bits) + 1, last, out);
    }
    if ((last & low_bits) != low_bits) {
      add_utf8_ranges(first, (last & ~low_bits) - 1, out);
      return add_utf8_ranges(last & ~low_bits, last, out);
    }
  }
  const std::string low = utf8_of(static_cast<char32_t>(first));
  const std::string high = utf8_of(static_cast<char32_t>(last));
  Sequence sequence;
  for (std::size_t index = 0; index < low.size(); ++index) {
    sequence.push_back(Element::of_bytes(
        ByteSet::range(static_cast<std::uint8_t>(low[index]), static_cast<std::uint8_t>(high[index]))));
  }
  out.push_back(std::move(sequence));
}

/// How a matched character is written: as UTF-8, or as JSON writes it inside a string.
enum class Writing { kRaw, kJsonString };

std::string json_escape(std::uint32_t control) {
  switch (control) {
    case '"': return "\\\"";
    case '\\': return "\\\\";
    case '\b': return "\\b";
    case '\f': return "\\f";
    case '\n': return "\\n";
    case '\r': return "\\r";
    case '\t': return "\\t";
    default: break;
  }
  const char* hex = "0123456789abcdef";
  return std::string("\\u00") + hex[control >> 4] + hex[control & 15];
}

class RegexEmitter {
 public:
  RegexEmitter(Grammar& grammar, Writing writing) : grammar_(grammar), writing_(writing) {}

  Sequence emit(const RegexNode& node) {
    // Nullable parts repeated inside a sequence are copied once per part (without_empty): a bound on the rules keeps
    // a crafted pattern from growing the grammar past what a request should cost.
    constexpr int kMaxRules = 200000;
    if (grammar_.rule_count() > kMaxRules) {
      throw RegexError("the regular expression expands into a grammar of more than " + std::to_string(kMaxRules) +
                       " rules, graphed's limit; fix: simplify the pattern (fewer optional parts repeated together)");
    }
    switch (node.kind) {
      case Kind::kCharacters: return emit_characters(node.characters);
      case Kind::kSequence: {
        Sequence sequence;
        for (const RegexNode& child : node.children) {
          const Sequence part = emit(child);
          sequence.insert(sequence.end(), part.begin(), part.end());
        }
        return sequence;
      }
      case Kind::kAlternatives: {
        std::vector<Sequence> alternatives;
        for (const RegexNode& child : node.children) alternatives.push_back(emit(child));
        return {grammar_.choice(std::move(alternatives), "regex.alternatives")};
      }
      case Kind::kRepeat: return emit_repeat(node);
    }
    return {};
  }

 private:
  // A repeated part that can match the empty string would make the grammar reach its own rule without reading a
  // byte; x{m,n} with x nullable is the same set as (x without the empty string){0,n}.
  Sequence emit_repeat(const RegexNode& node) {
    const RegexNode& child = node.children.front();
    int minimum = node.minimum;
    std::optional<RegexNode> item = child;
    if (child.nullable()) {
      item = without_empty(child);
      minimum = 0;
    }
    if (!item || node.maximum == 0) return {};
    return {grammar_.repeat(emit(*item), minimum, node.maximum, "regex.repeat")};
  }

  /// The node's strings but the empty one; nullopt when it has none.
  static std::optional<RegexNode> without_empty(const RegexNode& node) {
    if (!node.nullable()) return node;
    RegexNode alternatives;
    alternatives.kind = Kind::kAlternatives;
    if (node.kind == Kind::kSequence) {  // every part nullable: the first part that reads something, then the rest
      for (std::size_t index = 0; index < node.children.size(); ++index) {
        std::optional<RegexNode> first = without_empty(node.children[index]);
        if (!first) continue;
        RegexNode sequence;
        sequence.kind = Kind::kSequence;
        sequence.children.push_back(std::move(*first));
        sequence.children.insert(sequence.children.end(), node.children.begin() + static_cast<long>(index) + 1,
                                 node.children.end());
        alternatives.children.push_back(std::move(sequence));
      }
    } else if (node.kind == Kind::kAlternatives) {
      for (const RegexNode& child : node.children) {
        if (std::optional<RegexNode> part = without_empty(child)) alternatives.children.push_back(std::move(*part));
      }
    } else {  // a nullable repeat: one or more of its item without the empty string
      std::optional<RegexNode> item = without_empty(node.children.front());
      if (!item || node.maximum == 0) return std::nullopt;
      RegexNode repeat;
      repeat.kind = Kind::kRepeat;
      repeat.minimum = 1;
      repeat.maximum = node.maximum;
      repeat.children.push_back(std::move(*item));
      return repeat;
    }
    if (alternatives.children.empty()) return std::nullopt;
    if (alternatives.children.size() == 1) return std::move(alternatives.children.front());
    return alternatives;
  }

  Sequence emit_characters(const CodePointSet& set) {
    std::vector<Sequence> alternatives;
    ByteSet plain;
    for (const CodePointSet::Range& range : set.ranges()) {
      for (std::uint32_t code_point = range.first; code_point <= std::min(range.last, 0x7Fu); ++code_point) {
        const bool escaped =
            writing_ == Writing::kJsonString && (code_point < 0x20 || code_point == '"' || code_point == '\\');
        if (escaped) {
          alternatives.push_back(literal(json_escape(code_point)));
        } else {
          plain.add(static_cast<std::uint8_t>(code_point));
        }
      }
      if (range.last >= 0x80) add_utf8_ranges(std::max(range.first, 0x80u), range.last, alternatives);
    }
    if (!plain.empty()) alternatives.insert(alternatives.begin(), {Element::of_bytes(plain)});
    if (alternatives.size() == 1) return alternatives.front();
    return {grammar_.choice(std::move(alternatives), "regex.characters")};
  }

  Grammar& grammar_;
  Writing writing_;
};

std::vector<detail::RegexBranch> parse(std::string_view pattern) {
  try {
    return detail::parse_regex(pattern);
  } catch (const RegexError&) {
    throw;
  } catch (const Error& error) {
    throw RegexError(error.what());
  }
}

}  // namespace

Grammar compile_regex(std::string_view pattern) {
  Grammar grammar;
  RegexEmitter emitter(grammar, Writing::kRaw);
  std::vector<Sequence> alternatives;
  for (const detail::RegexBranch& branch : parse(pattern)) alternatives.push_back(emitter.emit(branch.body));
  grammar.set_root(grammar.add_rule("root", std::move(alternatives)));
  grammar.validate();
  return grammar;
}

Grammar compile_choice(const std::vector<std::string>& choices) {
  if (choices.empty()) throw RegexError("the list of choices is empty; fix: send at least one text to choose from");
  Grammar grammar;
  std::vector<Sequence> alternatives;
  for (const std::string& choice : choices) alternatives.push_back(literal(choice));
  grammar.set_root(grammar.add_rule("root", std::move(alternatives)));
  grammar.validate();
  return grammar;
}

Element add_pattern_string(Grammar& grammar, std::string_view pattern, int any_character) {
  RegexEmitter emitter(grammar, Writing::kJsonString);
  const Element anything = grammar.zero_or_more({Element::of_rule(any_character)}, "pattern.any");
  std::vector<Sequence> alternatives;
  for (const detail::RegexBranch& branch : parse(pattern)) {
    Sequence sequence;
    if (!branch.anchored_start) sequence.push_back(anything);
    const Sequence body = emitter.emit(branch.body);
    sequence.insert(sequence.end(), body.begin(), body.end());
    if (!branch.anchored_end) sequence.push_back(anything);
    alternatives.push_back(std::move(sequence));
  }
  const Element content = grammar.choice(std::move(alternatives), "pattern");
  return Element::of_rule(
      grammar.add_rule("pattern.string", {{Element::of_byte('"'), content, Element::of_byte('"')}}));
}

}  // namespace graphed::grammar
