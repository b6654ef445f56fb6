// jinja/operators.h — Python's + - * / // % ** on Values (int/float promotion, floor division, str and
// list concatenation and repetition), jinja2's `~`, unary - and +, `in`, len() and iteration, with
// Python's error messages.
#pragma once

#include <string>

#include "graphed/jinja/value.h"

namespace graphed::jinja {

/// left op right for op in + - * / // % ** ~. Throws EvaluationError on a type error, a division by
/// zero, an undefined operand (except for ~, which prints undefined as "") or a result too large.
Value binary_operation(const std::string& op, const Value& left, const Value& right);

/// -operand or +operand.
Value unary_operation(const std::string& op, const Value& operand);

/// `item in container`: substring, list or tuple member, dict key; false for an undefined container.
bool contains(const Value& container, const Value& item);

/// The items a for loop visits: list items, dict keys, a string's characters; nothing for undefined.
/// Throws EvaluationError "'int' object is not iterable" otherwise.
ValueList iterate(const Value& value);

/// len(value) for str (code points), list, tuple, dict and undefined (0). Throws for others.
int64_t length_of(const Value& value);

}  // namespace graphed::jinja
