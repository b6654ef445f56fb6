// jinja/arguments.h — BoundArguments: matches a call's positional and keyword arguments to a builtin's
// parameters the way Python does (defaults, "missing argument", "unexpected keyword"), for filters,
// tests, str/dict/list methods and globals.
#pragma once

#include <initializer_list>
#include <string>
#include <vector>

#include "graphed/jinja/value.h"

namespace graphed::jinja {

/// A builtin's parameter: required (no default) or with a default value.
struct ParameterSpec {
  ParameterSpec(const char* parameter_name) : name(parameter_name), required(true) {}
  ParameterSpec(const char* parameter_name, Value default_value)
      : name(parameter_name), fallback(std::move(default_value)), required(false) {}
  std::string name;
  Value fallback;
  bool required;
};

class BoundArguments {
 public:
  /// Throws EvaluationError "<function>() got an unexpected keyword argument 'x'", "... missing required
  /// argument 'x'" or "... takes at most N arguments (M given)".
  BoundArguments(const std::string& function, const Arguments& arguments,
                 std::initializer_list<ParameterSpec> parameters);
  /// The argument for parameter `index`, or its default.
  const Value& operator[](std::size_t index) const { return values_[index]; }
  /// Whether the caller passed parameter `index`.
  bool given(std::size_t index) const { return given_[index]; }

 private:
  std::vector<Value> values_;
  std::vector<bool> given_;
};

/// An int argument (a bool counts, as in Python). Throws EvaluationError naming `what` otherwise.
int64_t integer_argument(const Value& value, const std::string& what);

/// A str argument. Throws EvaluationError naming `what` otherwise.
const std::string& string_argument(const Value& value, const std::string& what);

}  // namespace graphed::jinja
