// grammar/grammar.cpp — ByteSet, the Grammar builder helpers, validation (left recursion) and the listing.
#include "graphed/grammar/grammar.h"

#include <bitset>
#include <cstdio>
#include <utility>

#include "graphed/util/error.h"

namespace graphed::grammar {

ByteSet ByteSet::of(std::uint8_t byte) { return ByteSet().add(byte); }

ByteSet ByteSet::range(std::uint8_t first, std::uint8_t last) { return ByteSet().add_range(first, last); }

ByteSet& ByteSet::add(std::uint8_t byte) {
  words_[byte >> 6] |= std::uint64_t{1} << (byte & 63);
  return *this;
}

ByteSet& ByteSet::add_range(std::uint8_t first, std::uint8_t last) {
  for (int byte = first; byte <= last; ++byte) add(static_cast<std::uint8_t>(byte));
  return *this;
}

ByteSet& ByteSet::add(const ByteSet& other) {
  for (std::size_t word = 0; word < words_.size(); ++word) words_[word] |= other.words_[word];
  return *this;
}

ByteSet ByteSet::complement() const {
  ByteSet result;
  for (std::size_t word = 0; word < words_.size(); ++word) result.words_[word] = ~words_[word];
  return result;
}

bool ByteSet::empty() const { return size() == 0; }

std::size_t ByteSet::size() const {
  std::size_t count = 0;
  for (std::uint64_t word : words_) count += std::bitset<64>(word).count();
  return count;
}

Sequence literal(std::string_view text) {
  Sequence sequence;
  for (char byte : text) sequence.push_back(Element::of_byte(static_cast<std::uint8_t>(byte)));
  return sequence;
}

Sequence concat(const std::vector<Sequence>& parts) {
  Sequence sequence;
  for (const Sequence& part : parts) sequence.insert(sequence.end(), part.begin(), part.end());
  return sequence;
}

int Grammar::declare_rule(std::string name) {
  rules_.push_back(Rule{std::move(name), {}});
  return rule_count() - 1;
}

void Grammar::add_alternative(int rule, Sequence sequence) {
  GRAPHED_INTERNAL_ASSERT(rule >= 0 && rule < rule_count(), "no rule ", rule);
  rules_[static_cast<std::size_t>(rule)].alternatives.push_back(std::move(sequence));
}

int Grammar::add_rule(std::string name, std::vector<Sequence> alternatives) {
  const int rule = declare_rule(std::move(name));
  rules_.back().alternatives = std::move(alternatives);
  return rule;
}

Element Grammar::as_element(const Sequence& sequence, const std::string& name) {
  if (sequence.size() == 1) return sequence.front();
  return Element::of_rule(add_rule(name, {sequence}));
}

Element Grammar::optional(const Sequence& sequence, const std::string& name) {
  return Element::of_rule(add_rule(name, {sequence, Sequence{}}));
}

Element Grammar::zero_or_more(const Sequence& sequence, const std::string& name) {
  const Element item = as_element(sequence, name + ".item");
  const int rule = declare_rule(name);
  add_alternative(rule, {item, Element::of_rule(rule)});
  add_alternative(rule, {});
  return Element::of_rule(rule);
}

Element Grammar::one_or_more(const Sequence& sequence, const std::string& name) {
  const Element item = as_element(sequence, name + ".item");
  const Element rest = zero_or_more({item}, name + ".rest");
  return Element::of_rule(add_rule(name, {{item, rest}}));
}

Element Grammar::repeat(const Sequence& sequence, int minimum, int maximum, const std::string& name) {
  GRAPHED_INTERNAL_ASSERT(minimum >= 0 && (maximum < 0 || maximum >= minimum), "bad bounds {", minimum, ",", maximum,
                          "} for ", name);
  const Element item = as_element(sequence, name + ".item");
  Sequence body(static_cast<std::size_t>(minimum), item);
  if (maximum < 0) {
    body.push_back(zero_or_more({item}, name + ".rest"));
  } else if (maximum > minimum) {
    // Up to maximum - minimum more, nested from the inside out: more_k ::= item more_(k+1) | empty.
    int inner = add_rule(name + ".more", {{item}, {}});
    for (int extra = maximum - minimum - 1; extra > 0; --extra) {
      inner = add_rule(name + ".more", {{item, Element::of_rule(inner)}, {}});
    }
    body.push_back(Element::of_rule(inner));
  }
  return Element::of_rule(add_rule(name, {body}));
}

Element Grammar::choice(std::vector<Sequence> alternatives, const std::string& name) {
  return Element::of_rule(add_rule(name, std::move(alternatives)));
}

std::vector<bool> Grammar::nullable_rules() const {
  std::vector<bool> nullable(rules_.size(), false);
  for (bool changed = true; changed;) {  // a fixed point: at most one pass per rule
    changed = false;
    for (std::size_t index = 0; index < rules_.size(); ++index) {
      if (nullable[index]) continue;
      for (const Sequence& alternative : rules_[index].alternatives) {
        bool all_nullable = true;
        for (const Element& element : alternative) {
          if (!element.is_rule() || !nullable[static_cast<std::size_t>(element.rule)]) {
            all_nullable = false;
            break;
          }
        }
        if (all_nullable) {
          nullable[index] = changed = true;
          break;
        }
      }
    }
  }
  return nullable;
}

bool Grammar::is_nullable(int rule) const { return nullable_rules().at(static_cast<std::size_t>(rule)); }

namespace {

// Depth-first search for a cycle in the "may start with" relation; returns the rule found on a cycle or -1.
int find_left_cycle(const std::vector<std::vector<int>>& starts, std::vector<int>& color, int rule) {
  color[static_cast<std::size_t>(rule)] = 1;  // on the path
  for (int next : starts[static_cast<std::size_t>(rule)]) {
    if (color[static_cast<std::size_t>(next)] == 1) return next;
    if (color[static_cast<std::size_t>(next)] == 0) {
      const int found = find_left_cycle(starts, color, next);
      if (found >= 0) return found;
    }
  }
  color[static_cast<std::size_t>(rule)] = 2;  // done, no cycle through it
  return -1;
}

}  // namespace

void Grammar::validate() const {
  GRAPHED_INTERNAL_ASSERT(root_ >= 0 && root_ < rule_count(), "grammar has no root rule");
  for (const Rule& rule : rules_) {
    GRAPHED_INTERNAL_ASSERT(!rule.alternatives.empty(), "grammar rule '", rule.name, "' has no alternatives");
    for (const Sequence& alternative : rule.alternatives) {
      for (const Element& element : alternative) {
        GRAPHED_INTERNAL_ASSERT(element.rule < rule_count(), "grammar rule '", rule.name, "' refers to rule ",
                                element.rule, " of ", rule_count());
        GRAPHED_INTERNAL_ASSERT(element.is_rule() || !element.bytes.empty(), "grammar rule '", rule.name,
                                "' has an empty byte set");
      }
    }
  }
  // starts[a] holds every rule that an alternative of a may begin with, past nullable rules.
  const std::vector<bool> nullable = nullable_rules();
  std::vector<std::vector<int>> starts(rules_.size());
  for (std::size_t index = 0; index < rules_.size(); ++index) {
    for (const Sequence& alternative : rules_[index].alternatives) {
      for (const Element& element : alternative) {
        if (!element.is_rule()) break;
        starts[index].push_back(element.rule);
        if (!nullable[static_cast<std::size_t>(element.rule)]) break;
      }
    }
  }
  std::vector<int> color(rules_.size(), 0);
  for (int rule = 0; rule < rule_count(); ++rule) {
    if (color[static_cast<std::size_t>(rule)] != 0) continue;
    const int cycle = find_left_cycle(starts, color, rule);
    GRAPHED_INTERNAL_ASSERT(cycle < 0, "grammar rule '", rules_[static_cast<std::size_t>(cycle < 0 ? 0 : cycle)].name,
                            "' is left-recursive (reaches itself without consuming a byte)");
  }
}

namespace {

std::string byte_text(int byte) {
  if (byte >= 0x21 && byte < 0x7f && byte != '\\' && byte != ']' && byte != '-' && byte != '\'') {
    return std::string(1, static_cast<char>(byte));
  }
  char text[8];
  std::snprintf(text, sizeof text, "\\x%02x", byte);
  return text;
}

std::string byte_set_text(const ByteSet& bytes) {
  if (bytes.size() == 1) {
    for (int byte = 0; byte < 256; ++byte) {
      if (bytes.contains(static_cast<std::uint8_t>(byte))) return "'" + byte_text(byte) + "'";
    }
  }
  std::string text = "[";
  for (int byte = 0; byte < 256; ++byte) {
    if (!bytes.contains(static_cast<std::uint8_t>(byte))) continue;
    int last = byte;
    while (last + 1 < 256 && bytes.contains(static_cast<std::uint8_t>(last + 1))) ++last;
    text += byte_text(byte);
    if (last > byte) text += "-" + byte_text(last);
    byte = last;
  }
  return text + "]";
}

}  // namespace

std::string Grammar::to_string() const {
  std::string text;
  for (int index = 0; index < rule_count(); ++index) {
    const Rule& rule = rules_[static_cast<std::size_t>(index)];
    text += rule.name + "#" + std::to_string(index) + (index == root_ ? " (root)" : "") + " ::=";
    for (std::size_t alternative = 0; alternative < rule.alternatives.size(); ++alternative) {
      if (alternative > 0) text += " |";
      if (rule.alternatives[alternative].empty()) text += " ()";
      for (const Element& element : rule.alternatives[alternative]) {
        text += " ";
        text += element.is_rule()
                    ? rules_[static_cast<std::size_t>(element.rule)].name + "#" + std::to_string(element.rule)
                    : byte_set_text(element.bytes);
      }
    }
    text += "\n";
  }
  return text;
}

}  // namespace graphed::grammar
