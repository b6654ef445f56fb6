// grammar/regex.h — regular expressions and fixed choices as grammars: compile_regex() for output that must match a
// pattern whole (vLLM's guided_regex), compile_choice() for output that must be one of some texts (guided_choice),
// and add_pattern_string() for JSON schema's `pattern` (a JSON string whose characters contain a match). Torch-free.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "graphed/grammar/grammar.h"
#include "graphed/util/error.h"

namespace graphed::grammar {

/// A pattern graphed cannot follow: not valid, or using syntax outside the supported subset (listed at
/// detail::parse_regex). what() names the construct and where, and ends with "; fix: ...".
class RegexError : public Error {
 public:
  explicit RegexError(const std::string& message) : Error(message) {}
};

/// The texts (UTF-8) that the pattern matches from start to end; `^` and `$` at the ends change nothing. Characters
/// are written as themselves. Throws RegexError.
Grammar compile_regex(std::string_view pattern);

/// Exactly one of `choices`, written as it is. Throws RegexError when there are none.
Grammar compile_choice(const std::vector<std::string>& choices);

/// Adds a JSON string (quotes included) whose decoded characters contain a match of `pattern`, with JSON schema's
/// reading: a top-level alternative not anchored by `^` or `$` may have any characters before or after its match
/// (`any_character`: the rule of one JSON string character). The pattern's characters are written as JSON writes
/// them: `"` and `\` escaped, control characters as \n, \t ... or \u00XX, others as UTF-8. Throws RegexError.
Element add_pattern_string(Grammar& grammar, std::string_view pattern, int any_character);

}  // namespace graphed::grammar
