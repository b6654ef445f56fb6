// jinja/value_tests.cpp — the builtin tests of jinja2 3.1 (jinja2/tests.py) on Values: type tests with
// Python's notion of types (bool is a number but not an integer), comparisons and membership.
#include "graphed/jinja/value_tests.h"

#include <unordered_map>

#include "graphed/jinja/arguments.h"
#include "graphed/jinja/operators.h"
#include "graphed/jinja/python_text.h"

namespace graphed::jinja {
namespace {

/// A test: its parameter name (nullptr when it takes none) and its body.
struct TestEntry {
  const char* parameter;
  bool (*function)(const Value& subject, const Value& argument);
};

/// Python's `value % divisor == remainder`, as jinja2's odd, even and divisibleby tests compute it.
bool modulo_is(const char* test, const Value& value, const Value& divisor, int64_t remainder) {
  if (value.is_string() || value.is_list() || value.is_dict() || value.is_none()) {
    throw EvaluationError(
        std::string("the '") + test + "' test needs a number, got " + type_name(value) + " " + to_repr(value),
        "apply it to numbers only");
  }
  return equals(binary_operation("%", value, divisor), Value(remainder));
}

bool same_object(const Value& a, const Value& b) {
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case ValueKind::kList: return &a.as_list() == &b.as_list();
    case ValueKind::kDict: return &a.as_dict() == &b.as_dict();
    case ValueKind::kNamespace: return &a.as_namespace() == &b.as_namespace();
    case ValueKind::kCallable: return &a.as_callable() == &b.as_callable();
    default: return equals(a, b);
  }
}

bool is_lower_text(const Value& v) {
  const std::string text = to_str(v);
  return python_lower(text) == text && python_upper(text) != text;
}

bool is_upper_text(const Value& v) {
  const std::string text = to_str(v);
  return python_upper(text) == text && python_lower(text) != text;
}

bool is_iterable(const Value& v) { return v.is_undefined() || v.is_string() || v.is_list() || v.is_dict(); }

const std::unordered_map<std::string, TestEntry>& tests() {
  using V = const Value&;
  static const std::unordered_map<std::string, TestEntry> table = {
      {"defined", {nullptr, [](V v, V) { return !v.is_undefined(); }}},
      {"undefined", {nullptr, [](V v, V) { return v.is_undefined(); }}},
      {"none", {nullptr, [](V v, V) { return v.is_none(); }}},
      {"boolean", {nullptr, [](V v, V) { return v.is_boolean(); }}},
      {"true", {nullptr, [](V v, V) { return v.is_boolean() && v.as_boolean(); }}},
      {"false", {nullptr, [](V v, V) { return v.is_boolean() && !v.as_boolean(); }}},
      {"integer", {nullptr, [](V v, V) { return v.is_integer(); }}},
      {"float", {nullptr, [](V v, V) { return v.is_float(); }}},
      {"number", {nullptr, [](V v, V) { return v.is_number(); }}},
      {"string", {nullptr, [](V v, V) { return v.is_string(); }}},
      {"mapping", {nullptr, [](V v, V) { return v.is_dict(); }}},
      {"iterable", {nullptr, [](V v, V) { return is_iterable(v); }}},
      {"sequence", {nullptr, [](V v, V) { return is_iterable(v); }}},
      {"callable", {nullptr, [](V v, V) { return v.is_callable(); }}},
      {"escaped", {nullptr, [](V, V) { return false; }}},
      {"odd", {nullptr, [](V v, V) { return modulo_is("odd", v, Value(2), 1); }}},
      {"even", {nullptr, [](V v, V) { return modulo_is("even", v, Value(2), 0); }}},
      {"lower", {nullptr, [](V v, V) { return is_lower_text(v); }}},
      {"upper", {nullptr, [](V v, V) { return is_upper_text(v); }}},
      {"divisibleby", {"num", [](V v, V a) { return modulo_is("divisibleby", v, a, 0); }}},
      {"eq", {"other", [](V v, V a) { return equals(v, a); }}},
      {"equalto", {"other", [](V v, V a) { return equals(v, a); }}},
      {"==", {"other", [](V v, V a) { return equals(v, a); }}},
      {"ne", {"other", [](V v, V a) { return !equals(v, a); }}},
      {"!=", {"other", [](V v, V a) { return !equals(v, a); }}},
      {"lt", {"other", [](V v, V a) { return compare(v, a, "<") < 0; }}},
      {"lessthan", {"other", [](V v, V a) { return compare(v, a, "<") < 0; }}},
      {"<", {"other", [](V v, V a) { return compare(v, a, "<") < 0; }}},
      {"le", {"other", [](V v, V a) { return compare(v, a, "<=") <= 0; }}},
      {"<=", {"other", [](V v, V a) { return compare(v, a, "<=") <= 0; }}},
      {"gt", {"other", [](V v, V a) { return compare(v, a, ">") > 0; }}},
      {"greaterthan", {"other", [](V v, V a) { return compare(v, a, ">") > 0; }}},
      {">", {"other", [](V v, V a) { return compare(v, a, ">") > 0; }}},
      {"ge", {"other", [](V v, V a) { return compare(v, a, ">=") >= 0; }}},
      {">=", {"other", [](V v, V a) { return compare(v, a, ">=") >= 0; }}},
      {"in", {"seq", [](V v, V a) { return contains(a, v); }}},
      {"sameas", {"other", [](V v, V a) { return same_object(v, a); }}},
  };
  return table;
}

}  // namespace

bool has_test(const std::string& name) { return tests().count(name) != 0; }

bool apply_test(const std::string& name, const Value& subject, const Arguments& arguments) {
  const auto found = tests().find(name);
  if (found == tests().end()) {
    throw EvaluationError("no test named '" + name + "'", "use a jinja2 builtin test such as defined, none, string");
  }
  const TestEntry& test = found->second;
  if (test.parameter == nullptr) {
    BoundArguments(name, arguments, {});
    return test.function(subject, Value());
  }
  BoundArguments bound(name, arguments, {test.parameter});
  return test.function(subject, bound[0]);
}

}  // namespace graphed::jinja
