// jinja/value_tests.h — jinja2's builtin tests (`x is name(args)`): defined undefined none boolean true
// false integer float number string mapping iterable sequence callable odd even divisibleby eq equalto
// == ne != lt lessthan < le <= gt greaterthan > ge >= in lower upper sameas escaped.
#pragma once

#include <string>

#include "graphed/jinja/value.h"

namespace graphed::jinja {

/// Whether a test of that name exists (checked when a template is parsed, as jinja2 does).
bool has_test(const std::string& name);

/// `subject is name(arguments)`. Throws EvaluationError for an unknown test or bad arguments.
bool apply_test(const std::string& name, const Value& subject, const Arguments& arguments);

}  // namespace graphed::jinja
