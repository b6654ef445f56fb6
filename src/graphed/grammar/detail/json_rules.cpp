// grammar/detail/json_rules.cpp — the JSON lexical rules and the any-value rules, compact form.
#include "graphed/grammar/detail/json_rules.h"

namespace graphed::grammar::detail {

namespace {

Element bytes(const ByteSet& set) { return Element::of_bytes(set); }

ByteSet hex_digits() { return ByteSet::range('0', '9').add_range('a', 'f').add_range('A', 'F'); }

// Well-formed UTF-8 of code points U+0080 and up (no overlong forms, no surrogates, nothing past U+10FFFF),
// as the Unicode standard's table 3-7 lists them.
int add_multibyte_character(Grammar& grammar) {
  const Element tail = bytes(ByteSet::range(0x80, 0xBF));
  return grammar.add_rule("utf8.multibyte", {{bytes(ByteSet::range(0xC2, 0xDF)), tail},
                                             {Element::of_byte(0xE0), bytes(ByteSet::range(0xA0, 0xBF)), tail},
                                             {bytes(ByteSet::range(0xE1, 0xEC).add_range(0xEE, 0xEF)), tail, tail},
                                             {Element::of_byte(0xED), bytes(ByteSet::range(0x80, 0x9F)), tail},
                                             {Element::of_byte(0xF0), bytes(ByteSet::range(0x90, 0xBF)), tail, tail},
                                             {bytes(ByteSet::range(0xF1, 0xF3)), tail, tail, tail},
                                             {Element::of_byte(0xF4), bytes(ByteSet::range(0x80, 0x8F)), tail, tail}});
}

// \uXXXX escapes: any code unit but a lone surrogate, or a high surrogate followed by a low one (a lone
// surrogate is not a character, and JSON parsers such as nlohmann-json refuse it).
int add_unicode_escape(Grammar& grammar) {
  const Element hex = bytes(hex_digits());
  const Element d = bytes(ByteSet::of('d').add('D'));
  return grammar.add_rule(
      "json.unicode_escape",
      {{bytes(ByteSet::range('0', '9').add_range('a', 'c').add_range('A', 'C')), hex, hex, hex},
       {d, bytes(ByteSet::range('0', '7')), hex, hex},
       {bytes(ByteSet::range('e', 'f').add_range('E', 'F')), hex, hex, hex},
       concat({{d, bytes(ByteSet::range('8', '9').add_range('a', 'b').add_range('A', 'B')), hex, hex},
               literal("\\u"),
               {d, bytes(ByteSet::range('c', 'f').add_range('C', 'F')), hex, hex}})});
}

int add_string_character(Grammar& grammar) {
  // Printable ASCII but '"' (0x22) and '\\' (0x5C); DEL (0x7F) needs no escape in JSON.
  const ByteSet plain = ByteSet::range(0x20, 0x21).add_range(0x23, 0x5B).add_range(0x5D, 0x7F);
  const ByteSet escaped = ByteSet::of('"').add('\\').add('/').add('b').add('f').add('n').add('r').add('t');
  const int unicode = add_unicode_escape(grammar);
  const int multibyte = add_multibyte_character(grammar);
  return grammar.add_rule("json.character", {{bytes(plain)},
                                             {Element::of_byte('\\'), bytes(escaped)},
                                             {Element::of_byte('\\'), Element::of_byte('u'), Element::of_rule(unicode)},
                                             {Element::of_rule(multibyte)}});
}

// Numbers are bounded (at most 20 digits before the point, 20 after it, 2 in the exponent) so that every
// one fits a double, as parsers such as nlohmann-json require, and a model cannot run on digits forever.
int add_integer(Grammar& grammar) {
  const Element digits = grammar.repeat({bytes(ByteSet::range('0', '9'))}, 0, 19, "json.digits");
  const int magnitude = grammar.add_rule("json.magnitude", {literal("0"), {bytes(ByteSet::range('1', '9')), digits}});
  return grammar.add_rule("json.integer", {{grammar.optional(literal("-")), Element::of_rule(magnitude)}});
}

int add_number(Grammar& grammar, int integer) {
  const Element digit = bytes(ByteSet::range('0', '9'));
  const Element fraction_digits = grammar.repeat({digit}, 1, 20, "json.fraction_digits");
  const Element fraction = grammar.optional({Element::of_byte('.'), fraction_digits}, "json.fraction");
  const Element sign = grammar.optional({bytes(ByteSet::of('+').add('-'))}, "json.exponent_sign");
  const Element exponent_digits = grammar.repeat({digit}, 1, 2, "json.exponent_digits");
  const Element exponent = grammar.optional({bytes(ByteSet::of('e').add('E')), sign, exponent_digits}, "json.exponent");
  return grammar.add_rule("json.number", {{Element::of_rule(integer), fraction, exponent}});
}

// value, object and array refer to each other; none starts with a reference, so none is left-recursive.
void add_any_value(Grammar& grammar, JsonRules& rules) {
  rules.value = grammar.declare_rule("json.value");
  rules.object = grammar.declare_rule("json.object");
  rules.array = grammar.declare_rule("json.array");
  const Element value = Element::of_rule(rules.value);
  const Element member = Element::of_rule(
      grammar.add_rule("json.member", {{Element::of_rule(rules.string), Element::of_byte(':'), value}}));
  const Element more_members = grammar.zero_or_more({Element::of_byte(','), member}, "json.more_members");
  grammar.add_alternative(rules.object, literal("{}"));
  grammar.add_alternative(rules.object, {Element::of_byte('{'), member, more_members, Element::of_byte('}')});
  const Element more_values = grammar.zero_or_more({Element::of_byte(','), value}, "json.more_values");
  grammar.add_alternative(rules.array, literal("[]"));
  grammar.add_alternative(rules.array, {Element::of_byte('['), value, more_values, Element::of_byte(']')});
  for (int rule : {rules.object, rules.array, rules.string, rules.number, rules.boolean, rules.null}) {
    grammar.add_alternative(rules.value, {Element::of_rule(rule)});
  }
}

}  // namespace

JsonRules add_json_rules(Grammar& grammar) {
  JsonRules rules;
  rules.string_character = add_string_character(grammar);
  const Element characters = grammar.zero_or_more({Element::of_rule(rules.string_character)}, "json.characters");
  rules.string = grammar.add_rule("json.string", {{Element::of_byte('"'), characters, Element::of_byte('"')}});
  rules.integer = add_integer(grammar);
  rules.number = add_number(grammar, rules.integer);
  rules.boolean = grammar.add_rule("json.boolean", {literal("true"), literal("false")});
  rules.null = grammar.add_rule("json.null", {literal("null")});
  add_any_value(grammar, rules);
  return rules;
}

}  // namespace graphed::grammar::detail
