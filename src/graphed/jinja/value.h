// jinja/value.h — Value, the dynamic value of graphed's Jinja subset (undefined, none, bool, int, float,
// str, list/tuple, ordered dict, namespace, callable) with Python's truthiness, ==, <, str() and repr().
// Lists and dicts are immutable once built (the sandbox); only a namespace's attributes change.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace graphed::jinja {

class Value;
struct List;
class Dict;
struct Namespace;
class Callable;
struct Arguments;

using ValueList = std::vector<Value>;

/// A failure inside an operation on values (a type mismatch, an undefined value used, a bad argument).
/// The renderer turns it into a TemplateError naming the template position; it never leaves the library.
class EvaluationError : public std::runtime_error {
 public:
  /// `fix` (may be empty) says what to do; `raised_by_template` marks raise_exception(message).
  explicit EvaluationError(const std::string& message, std::string fix = {}, bool raised_by_template = false)
      : std::runtime_error(message), fix_(std::move(fix)), raised_by_template_(raised_by_template) {}
  const std::string& fix() const { return fix_; }
  bool raised_by_template() const { return raised_by_template_; }

 private:
  std::string fix_;
  bool raised_by_template_;
};

enum class ValueKind { kUndefined, kNone, kBoolean, kInteger, kFloat, kString, kList, kDict, kNamespace, kCallable };

/// A Python-like value. Copies are cheap for lists, dicts, namespaces and callables (shared).
class Value {
 public:
  /// Undefined, with no hint.
  Value() = default;
  Value(bool boolean);
  Value(int integer);
  Value(int64_t integer);
  Value(double number);
  Value(const char* text);
  Value(std::string text);

  /// A string marked safe (markupsafe's Markup, from the safe and escape filters): `+` with a plain
  /// string HTML-escapes the plain one, as jinja2 does.
  static Value markup(std::string text);
  /// Undefined; `hint` is jinja2's message for using it ("'foo' is undefined").
  static Value undefined(std::string hint);
  static Value none();
  static Value list(ValueList items);
  static Value tuple(ValueList items);
  static Value dict(Dict dict);
  static Value new_namespace(Dict attributes);
  static Value callable(std::string name, std::function<Value(const Arguments&)> function);

  ValueKind kind() const { return kind_; }
  bool is_undefined() const { return kind_ == ValueKind::kUndefined; }
  bool is_none() const { return kind_ == ValueKind::kNone; }
  bool is_boolean() const { return kind_ == ValueKind::kBoolean; }
  bool is_integer() const { return kind_ == ValueKind::kInteger; }
  bool is_float() const { return kind_ == ValueKind::kFloat; }
  /// bool, int or float: Python numbers (bool is an int there).
  bool is_number() const { return is_boolean() || is_integer() || is_float(); }
  bool is_string() const { return kind_ == ValueKind::kString; }
  bool is_markup() const { return is_string() && boolean_; }
  bool is_list() const { return kind_ == ValueKind::kList; }
  bool is_dict() const { return kind_ == ValueKind::kDict; }
  bool is_namespace() const { return kind_ == ValueKind::kNamespace; }
  bool is_callable() const { return kind_ == ValueKind::kCallable; }

  bool as_boolean() const { return boolean_; }
  /// An int (or a bool as 0/1).
  int64_t as_integer() const { return is_boolean() ? (boolean_ ? 1 : 0) : integer_; }
  /// Any number as a double.
  double as_float() const;
  /// A string's text, or an undefined value's hint.
  const std::string& as_string() const { return text_; }
  const List& as_list() const { return *list_; }
  const Dict& as_dict() const { return *dict_; }
  Namespace& as_namespace() const { return *namespace_; }
  const Callable& as_callable() const { return *callable_; }
  /// The message jinja2 gives when this undefined value is used.
  const std::string& undefined_hint() const { return text_; }

 private:
  ValueKind kind_ = ValueKind::kUndefined;
  bool boolean_ = false;  // a bool's value; for a string, whether it is Markup
  int64_t integer_ = 0;
  double float_ = 0.0;
  std::string text_;
  std::shared_ptr<const List> list_;
  std::shared_ptr<const Dict> dict_;
  std::shared_ptr<Namespace> namespace_;
  std::shared_ptr<const Callable> callable_;
};

/// A list, or a tuple (printed with parentheses, never equal to a list).
struct List {
  ValueList items;
  bool is_tuple = false;
};

/// An ordered mapping like Python's dict: keys compare with Python ==, insertion order is kept.
class Dict {
 public:
  /// The value of the key, or nullptr.
  const Value* find(const Value& key) const;
  /// Replaces the value of an existing key (keeping its place) or appends the pair.
  void set(const Value& key, Value value);
  const std::vector<std::pair<Value, Value>>& entries() const { return entries_; }
  std::size_t size() const { return entries_.size(); }
  bool empty() const { return entries_.empty(); }

 private:
  std::size_t position_of(const Value& key) const;
  std::vector<std::pair<Value, Value>> entries_;
  std::unordered_map<std::string, std::size_t> string_positions_;
};

/// jinja2's namespace(): the one mutable object (`set ns.attribute = value`).
struct Namespace {
  Dict attributes;
};

/// Call arguments: positional values, then keyword values in the order given.
struct Arguments {
  ValueList positional;
  std::vector<std::pair<std::string, Value>> keyword;
};

/// A global function, macro, bound method or caller().
class Callable {
 public:
  using Function = std::function<Value(const Arguments&)>;
  Callable(std::string name, Function function) : name_(std::move(name)), function_(std::move(function)) {}
  const std::string& name() const { return name_; }
  Value call(const Arguments& arguments) const { return function_(arguments); }

 private:
  std::string name_;
  Function function_;
};

/// Python's bool(value); undefined is false.
bool is_true(const Value& value);

/// Python's ==: numbers by value (True == 1 == 1.0), strings, lists and tuples item by item, dicts as
/// mappings; two undefined values are equal.
bool equals(const Value& left, const Value& right);

/// Python's ordering for <, <=, >, >=: negative, zero or positive. Numbers, strings (code point order)
/// and lists/tuples of those. Throws EvaluationError "'<' not supported between instances of 'int'
/// and 'str'" otherwise (`operator_text` is the operator named in that message).
int compare(const Value& left, const Value& right, const std::string& operator_text);

/// Python's str(): strings as they are, None/True/False, floats in repr form, containers as repr.
/// Undefined gives "".
std::string to_str(const Value& value);

/// Python's repr(): strings quoted ('it', "it's"), containers recursively.
std::string to_repr(const Value& value);

/// The Python type name used in messages: "str", "int", "float", "bool", "NoneType", "list", "tuple",
/// "dict", "Namespace", "function", "Undefined".
std::string type_name(const Value& value);

/// Throws EvaluationError with the undefined value's hint (jinja2's UndefinedError).
[[noreturn]] void fail_undefined(const Value& value);

/// Python's repr() of a float: the shortest text that reads back exactly (0.1, 1e-05, 1e+16, 2.0, inf).
std::string format_float(double number);

}  // namespace graphed::jinja
