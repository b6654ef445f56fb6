// jinja/arguments.cpp — BoundArguments: Python-style matching of call arguments to the parameters of
// a builtin filter, test, method or global, with Python's error messages.
#include "graphed/jinja/arguments.h"

namespace graphed::jinja {

BoundArguments::BoundArguments(const std::string& function, const Arguments& arguments,
                               std::initializer_list<ParameterSpec> parameters) {
  const std::vector<ParameterSpec> specs(parameters);
  if (arguments.positional.size() > specs.size()) {
    throw EvaluationError(function + "() takes at most " + std::to_string(specs.size()) + " argument" +
                              (specs.size() == 1 ? "" : "s") + " (" + std::to_string(arguments.positional.size()) +
                              " given)",
                          "remove the extra arguments");
  }
  values_.resize(specs.size());
  given_.assign(specs.size(), false);
  for (std::size_t i = 0; i < arguments.positional.size(); ++i) {
    values_[i] = arguments.positional[i];
    given_[i] = true;
  }
  for (const auto& [keyword, value] : arguments.keyword) {
    std::size_t index = 0;
    while (index < specs.size() && specs[index].name != keyword) ++index;
    if (index == specs.size()) {
      std::string names;
      for (const ParameterSpec& spec : specs) names += (names.empty() ? "" : ", ") + spec.name;
      throw EvaluationError(function + "() got an unexpected keyword argument '" + keyword + "'",
                            names.empty() ? "call it without arguments" : "use one of its parameters: " + names);
    }
    if (given_[index]) {
      throw EvaluationError(function + "() got multiple values for argument '" + keyword + "'",
                            "pass it once, by position or by name");
    }
    values_[index] = value;
    given_[index] = true;
  }
  for (std::size_t i = 0; i < specs.size(); ++i) {
    if (given_[i]) continue;
    if (specs[i].required) {
      throw EvaluationError(function + "() missing required argument '" + specs[i].name + "'",
                            "pass a value for '" + specs[i].name + "'");
    }
    values_[i] = specs[i].fallback;
  }
}

int64_t integer_argument(const Value& value, const std::string& what) {
  if (value.is_integer() || value.is_boolean()) return value.as_integer();
  if (value.is_undefined()) fail_undefined(value);
  throw EvaluationError(what + " must be an integer, got " + type_name(value) + " " + to_repr(value),
                        "pass an integer");
}

const std::string& string_argument(const Value& value, const std::string& what) {
  if (value.is_string()) return value.as_string();
  if (value.is_undefined()) fail_undefined(value);
  throw EvaluationError(what + " must be a string, got " + type_name(value) + " " + to_repr(value), "pass a string");
}

}  // namespace graphed::jinja
