// jinja/attributes.h — `obj.name`, `obj[key]` and `obj[a:b:c]` as jinja2's ImmutableSandboxedEnvironment
// does them: Python methods of str, dict and list bound to obj, then items; a miss is an undefined value
// with jinja2's hint; mutating methods (list.append, dict.update, ...) are undefined, as in the sandbox.
#pragma once

#include <string>

#include "graphed/jinja/value.h"

namespace graphed::jinja {

// The methods there are: str: startswith endswith split rsplit splitlines strip lstrip rstrip upper lower
// title capitalize replace find rfind index count join isdigit isalpha isalnum isspace islower isupper;
// dict: items keys values get (items/keys/values return lists); list and tuple: index count.

/// obj.name. Throws EvaluationError only when obj is undefined.
Value get_attribute(const Value& object, const std::string& name);

/// obj[key]: list/tuple/str by int index (negative from the end), dict by key, namespace attribute.
/// Throws EvaluationError only when obj is undefined.
Value get_item(const Value& object, const Value& key);

/// obj[start:stop:step] of a list, tuple or str (each bound int or none). Throws EvaluationError for
/// an undefined obj, non-integer bounds or a zero step.
Value get_slice(const Value& object, const Value& start, const Value& stop, const Value& step);

}  // namespace graphed::jinja
