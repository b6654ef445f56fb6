// grammar/detail/json_rules.h — the JSON lexical rules (string characters as valid UTF-8 or escapes,
// strings, integers, numbers, literals) and a rule for any JSON value, added to a Grammar in graphed's
// canonical compact form (no whitespace anywhere). Internal to grammar/: the schema compiler's building blocks.
#pragma once

#include "graphed/grammar/grammar.h"

namespace graphed::grammar::detail {

/// Rule indices of the JSON building blocks inside one Grammar.
struct JsonRules {
  int string_character = -1;  // one character: an unescaped UTF-8 code point or one escape (a \u pair counts once)
  int string = -1;            // '"' character* '"'
  int integer = -1;           // '-'? ('0' | [1-9][0-9]{0,19})
  int number = -1;            // integer ('.' [0-9]{1,20})? ([eE] [+-]? [0-9]{1,2})?
  int boolean = -1;           // true | false
  int null = -1;              // null
  int value = -1;             // any JSON value
  int object = -1;            // any JSON object
  int array = -1;             // any JSON array
};

/// Adds the rules to `grammar` and returns their indices.
JsonRules add_json_rules(Grammar& grammar);

}  // namespace graphed::grammar::detail
