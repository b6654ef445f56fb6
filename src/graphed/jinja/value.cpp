// jinja/value.cpp — Value construction, the ordered Dict, and Python's truthiness, ==, ordering,
// str(), repr() and float repr for the Jinja subset.
#include "graphed/jinja/value.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "graphed/jinja/python_text.h"

namespace graphed::jinja {

Value::Value(bool boolean) : kind_(ValueKind::kBoolean), boolean_(boolean) {}
Value::Value(int integer) : kind_(ValueKind::kInteger), integer_(integer) {}
Value::Value(int64_t integer) : kind_(ValueKind::kInteger), integer_(integer) {}
Value::Value(double number) : kind_(ValueKind::kFloat), float_(number) {}
Value::Value(const char* text) : kind_(ValueKind::kString), text_(text) {}
Value::Value(std::string text) : kind_(ValueKind::kString), text_(std::move(text)) {}

Value Value::markup(std::string text) {
  Value value(std::move(text));
  value.boolean_ = true;
  return value;
}

Value Value::undefined(std::string hint) {
  Value value;
  value.text_ = std::move(hint);
  return value;
}

Value Value::none() {
  Value value;
  value.kind_ = ValueKind::kNone;
  return value;
}

Value Value::list(ValueList items) {
  Value value;
  value.kind_ = ValueKind::kList;
  value.list_ = std::make_shared<const List>(List{std::move(items), false});
  return value;
}

Value Value::tuple(ValueList items) {
  Value value;
  value.kind_ = ValueKind::kList;
  value.list_ = std::make_shared<const List>(List{std::move(items), true});
  return value;
}

Value Value::dict(Dict dict) {
  Value value;
  value.kind_ = ValueKind::kDict;
  value.dict_ = std::make_shared<const Dict>(std::move(dict));
  return value;
}

Value Value::new_namespace(Dict attributes) {
  Value value;
  value.kind_ = ValueKind::kNamespace;
  value.namespace_ = std::make_shared<Namespace>(Namespace{std::move(attributes)});
  return value;
}

Value Value::callable(std::string name, std::function<Value(const Arguments&)> function) {
  Value value;
  value.kind_ = ValueKind::kCallable;
  value.callable_ = std::make_shared<const Callable>(std::move(name), std::move(function));
  return value;
}

double Value::as_float() const {
  if (is_float()) return float_;
  return static_cast<double>(as_integer());
}

std::size_t Dict::position_of(const Value& key) const {
  if (key.is_string()) {
    const auto found = string_positions_.find(key.as_string());
    return found == string_positions_.end() ? entries_.size() : found->second;
  }
  for (std::size_t i = 0; i < entries_.size(); ++i) {
    if (!entries_[i].first.is_string() && equals(entries_[i].first, key)) return i;
  }
  return entries_.size();
}

const Value* Dict::find(const Value& key) const {
  const std::size_t position = position_of(key);
  return position == entries_.size() ? nullptr : &entries_[position].second;
}

void Dict::set(const Value& key, Value value) {
  const std::size_t position = position_of(key);
  if (position < entries_.size()) {
    entries_[position].second = std::move(value);
    return;
  }
  if (key.is_string()) string_positions_.emplace(key.as_string(), entries_.size());
  entries_.emplace_back(key, std::move(value));
}

bool is_true(const Value& value) {
  switch (value.kind()) {
    case ValueKind::kUndefined:
    case ValueKind::kNone: return false;
    case ValueKind::kBoolean: return value.as_boolean();
    case ValueKind::kInteger: return value.as_integer() != 0;
    case ValueKind::kFloat: return value.as_float() != 0.0;
    case ValueKind::kString: return !value.as_string().empty();
    case ValueKind::kList: return !value.as_list().items.empty();
    case ValueKind::kDict: return !value.as_dict().empty();
    case ValueKind::kNamespace:
    case ValueKind::kCallable: return true;
  }
  return false;
}

bool equals(const Value& left, const Value& right) {
  if (left.is_number() && right.is_number()) {
    if (left.is_float() || right.is_float()) return left.as_float() == right.as_float();
    return left.as_integer() == right.as_integer();
  }
  if (left.kind() != right.kind()) return false;
  switch (left.kind()) {
    case ValueKind::kUndefined:
    case ValueKind::kNone: return true;
    case ValueKind::kString: return left.as_string() == right.as_string();
    case ValueKind::kList: {
      const List& a = left.as_list();
      const List& b = right.as_list();
      if (a.is_tuple != b.is_tuple || a.items.size() != b.items.size()) return false;
      for (std::size_t i = 0; i < a.items.size(); ++i) {
        if (!equals(a.items[i], b.items[i])) return false;
      }
      return true;
    }
    case ValueKind::kDict: {
      const Dict& a = left.as_dict();
      const Dict& b = right.as_dict();
      if (a.size() != b.size()) return false;
      for (const auto& [key, value] : a.entries()) {
        const Value* other = b.find(key);
        if (other == nullptr || !equals(value, *other)) return false;
      }
      return true;
    }
    case ValueKind::kNamespace: return &left.as_namespace() == &right.as_namespace();
    case ValueKind::kCallable: return &left.as_callable() == &right.as_callable();
    default: return false;
  }
}

int compare(const Value& left, const Value& right, const std::string& operator_text) {
  if (left.is_number() && right.is_number()) {
    if (left.is_float() || right.is_float()) {
      const double a = left.as_float();
      const double b = right.as_float();
      return a < b ? -1 : (a > b ? 1 : 0);
    }
    const int64_t a = left.as_integer();
    const int64_t b = right.as_integer();
    return a < b ? -1 : (a > b ? 1 : 0);
  }
  if (left.is_string() && right.is_string()) {
    const int order = left.as_string().compare(right.as_string());
    return order < 0 ? -1 : (order > 0 ? 1 : 0);
  }
  if (left.is_list() && right.is_list() && left.as_list().is_tuple == right.as_list().is_tuple) {
    const ValueList& a = left.as_list().items;
    const ValueList& b = right.as_list().items;
    for (std::size_t i = 0; i < a.size() && i < b.size(); ++i) {
      if (!equals(a[i], b[i])) return compare(a[i], b[i], operator_text);
    }
    return a.size() < b.size() ? -1 : (a.size() > b.size() ? 1 : 0);
  }
  if (left.is_undefined()) fail_undefined(left);
  if (right.is_undefined()) fail_undefined(right);
  throw EvaluationError("'" + operator_text + "' not supported between instances of '" + type_name(left) + "' and '" +
                        type_name(right) + "'");
}

std::string format_float(double number) {
  if (std::isnan(number)) return "nan";
  if (std::isinf(number)) return number < 0 ? "-inf" : "inf";
  char buffer[40];
  int precision = 1;
  for (; precision <= 17; ++precision) {
    std::snprintf(buffer, sizeof buffer, "%.*e", precision - 1, number);
    if (std::strtod(buffer, nullptr) == number) break;
  }
  // buffer holds "-d.ddde+XX": split into sign, digits and the decimal exponent.
  std::string text(buffer);
  std::string sign;
  if (text[0] == '-') {
    sign = "-";
    text.erase(0, 1);
  }
  const std::size_t exponent_at = text.find('e');
  const int exponent = std::atoi(text.c_str() + exponent_at + 1);
  std::string digits = text.substr(0, exponent_at);
  if (digits.size() > 1) digits.erase(1, 1);  // drop the decimal point
  while (digits.size() > 1 && digits.back() == '0') digits.pop_back();
  const int point = exponent + 1;  // digits before the decimal point
  if (point > -4 && point <= 16) {
    if (point <= 0) return sign + "0." + std::string(static_cast<std::size_t>(-point), '0') + digits;
    if (static_cast<std::size_t>(point) >= digits.size()) {
      return sign + digits + std::string(static_cast<std::size_t>(point) - digits.size(), '0') + ".0";
    }
    return sign + digits.substr(0, static_cast<std::size_t>(point)) + "." +
           digits.substr(static_cast<std::size_t>(point));
  }
  std::string mantissa = digits.size() > 1 ? digits.substr(0, 1) + "." + digits.substr(1) : digits;
  char exponent_text[16];
  std::snprintf(exponent_text, sizeof exponent_text, "e%c%02d", exponent < 0 ? '-' : '+', std::abs(exponent));
  return sign + mantissa + exponent_text;
}

std::string type_name(const Value& value) {
  switch (value.kind()) {
    case ValueKind::kUndefined: return "Undefined";
    case ValueKind::kNone: return "NoneType";
    case ValueKind::kBoolean: return "bool";
    case ValueKind::kInteger: return "int";
    case ValueKind::kFloat: return "float";
    case ValueKind::kString: return "str";
    case ValueKind::kList: return value.as_list().is_tuple ? "tuple" : "list";
    case ValueKind::kDict: return "dict";
    case ValueKind::kNamespace: return "Namespace";
    case ValueKind::kCallable: return "function";
  }
  return "object";
}

void fail_undefined(const Value& value) {
  throw EvaluationError(value.undefined_hint().empty() ? "a value is undefined" : value.undefined_hint(),
                        "pass the value in the context, or test it with `is defined` before using it");
}

namespace {

constexpr int kMaxReprNesting = 512;

std::string repr_at(const Value& value, int depth);

std::string sequence_repr(const List& list, int depth) {
  std::string out = list.is_tuple ? "(" : "[";
  for (std::size_t i = 0; i < list.items.size(); ++i) {
    if (i > 0) out += ", ";
    out += repr_at(list.items[i], depth + 1);
  }
  if (list.is_tuple && list.items.size() == 1) out += ",";
  out += list.is_tuple ? ")" : "]";
  return out;
}

std::string dict_repr(const Dict& dict, int depth) {
  std::string out = "{";
  bool first = true;
  for (const auto& [key, value] : dict.entries()) {
    if (!first) out += ", ";
    first = false;
    out += repr_at(key, depth + 1) + ": " + repr_at(value, depth + 1);
  }
  return out + "}";
}

std::string repr_at(const Value& value, int depth) {
  if (depth > kMaxReprNesting) {
    throw EvaluationError("a value is nested more than " + std::to_string(kMaxReprNesting) + " levels deep to print",
                          "print values with fewer nested lists and dicts");
  }
  switch (value.kind()) {
    case ValueKind::kString:
      return value.is_markup() ? "Markup(" + python_string_repr(value.as_string()) + ")"
                               : python_string_repr(value.as_string());
    case ValueKind::kList: return sequence_repr(value.as_list(), depth);
    case ValueKind::kDict: return dict_repr(value.as_dict(), depth);
    case ValueKind::kNamespace: return "<Namespace " + dict_repr(value.as_namespace().attributes, depth) + ">";
    default: return to_repr(value);
  }
}

}  // namespace

std::string to_str(const Value& value) {
  switch (value.kind()) {
    case ValueKind::kUndefined: return "";
    case ValueKind::kString: return value.as_string();
    default: return to_repr(value);
  }
}

std::string to_repr(const Value& value) {
  switch (value.kind()) {
    case ValueKind::kUndefined: return "Undefined";
    case ValueKind::kNone: return "None";
    case ValueKind::kBoolean: return value.as_boolean() ? "True" : "False";
    case ValueKind::kInteger: return std::to_string(value.as_integer());
    case ValueKind::kFloat: return format_float(value.as_float());
    case ValueKind::kString:
    case ValueKind::kList:
    case ValueKind::kDict:
    case ValueKind::kNamespace: return repr_at(value, 0);
    case ValueKind::kCallable: return "<function " + value.as_callable().name() + ">";
  }
  return "";
}

}  // namespace graphed::jinja
