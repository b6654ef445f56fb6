// jinja/operators.cpp — Python arithmetic and membership for the Jinja subset, with CPython's results
// (floor division and modulo round toward negative infinity) and error messages.
#include "graphed/jinja/operators.h"

#include <cmath>
#include <limits>

#include "graphed/jinja/python_text.h"
#include "graphed/util/utf8.h"

namespace graphed::jinja {
namespace {

/// Largest string (bytes) that `*`, `+` or `~` may build, and a list's limit in items divided by 16 (a
/// runaway guard against templates that grow a value without end; real templates stay far below).
constexpr int64_t kMaxRepeatedSize = int64_t{64} << 20;

void check_joined_size(std::size_t left, std::size_t right, const char* what) {
  if (left + right > static_cast<std::size_t>(kMaxRepeatedSize)) {
    throw EvaluationError(std::string("joining two ") + what + " would make more than 64 MiB",
                          "check the template for a value that grows in a loop");
  }
}

[[noreturn]] void fail_operands(const std::string& op, const Value& left, const Value& right) {
  throw EvaluationError(
      "unsupported operand type(s) for " + op + ": '" + type_name(left) + "' and '" + type_name(right) + "'",
      "convert the values first (|string, |int, |float) or use ~ to join text");
}

bool both_integers(const Value& left, const Value& right) { return !left.is_float() && !right.is_float(); }

int64_t checked(bool overflowed, int64_t result, const std::string& op) {
  if (overflowed) {
    throw EvaluationError("integer overflow in '" + op + "'", "use smaller numbers (graphed's ints are 64-bit)");
  }
  return result;
}

Value add(const Value& left, const Value& right) {
  if (left.is_number() && right.is_number()) {
    if (!both_integers(left, right)) return Value(left.as_float() + right.as_float());
    int64_t sum = 0;
    const bool overflowed = __builtin_add_overflow(left.as_integer(), right.as_integer(), &sum);
    return Value(checked(overflowed, sum, "+"));
  }
  if (left.is_string()) {
    if (right.is_string()) {
      check_joined_size(left.as_string().size(), right.as_string().size(), "strings");
      if (!left.is_markup() && !right.is_markup()) return Value(left.as_string() + right.as_string());
      // markupsafe: Markup + str escapes the plain string, and so does str + Markup.
      auto safe_text = [](const Value& text) {
        return text.is_markup() ? text.as_string() : html_escape(text.as_string());
      };
      return Value::markup(safe_text(left) + safe_text(right));
    }
    throw EvaluationError("can only concatenate str (not \"" + type_name(right) + "\") to str",
                          "convert the value with |string, or join with ~ instead of +");
  }
  if (left.is_list() && right.is_list() && left.as_list().is_tuple == right.as_list().is_tuple) {
    check_joined_size(left.as_list().items.size() * 16, right.as_list().items.size() * 16, "lists");
    ValueList items = left.as_list().items;
    items.insert(items.end(), right.as_list().items.begin(), right.as_list().items.end());
    return left.as_list().is_tuple ? Value::tuple(std::move(items)) : Value::list(std::move(items));
  }
  if (left.is_list()) {
    const std::string kind = type_name(left);
    throw EvaluationError("can only concatenate " + kind + " (not \"" + type_name(right) + "\") to " + kind,
                          "add two lists");
  }
  fail_operands("+", left, right);
}

Value repeat(const Value& sequence, int64_t times) {
  times = std::max<int64_t>(times, 0);
  if (sequence.is_string()) {
    const auto size = static_cast<int64_t>(sequence.as_string().size());
    if (size > 0 && times > kMaxRepeatedSize / size) {
      throw EvaluationError("repeating a string " + std::to_string(times) + " times makes more than 64 MiB",
                            "repeat it fewer times");
    }
    std::string out;
    out.reserve(static_cast<std::size_t>(size * times));
    for (int64_t i = 0; i < times; ++i) out += sequence.as_string();
    return Value(std::move(out));
  }
  const ValueList& items = sequence.as_list().items;
  const auto size = static_cast<int64_t>(items.size());
  if (size > 0 && times > kMaxRepeatedSize / size / 16) {
    throw EvaluationError("repeating a list " + std::to_string(times) + " times makes too many items",
                          "repeat it fewer times");
  }
  ValueList out;
  for (int64_t i = 0; i < times; ++i) out.insert(out.end(), items.begin(), items.end());
  return sequence.as_list().is_tuple ? Value::tuple(std::move(out)) : Value::list(std::move(out));
}

Value multiply(const Value& left, const Value& right) {
  if (left.is_number() && right.is_number()) {
    if (!both_integers(left, right)) return Value(left.as_float() * right.as_float());
    int64_t product = 0;
    const bool overflowed = __builtin_mul_overflow(left.as_integer(), right.as_integer(), &product);
    return Value(checked(overflowed, product, "*"));
  }
  const bool left_int = left.is_integer() || left.is_boolean();
  const bool right_int = right.is_integer() || right.is_boolean();
  if ((left.is_string() || left.is_list()) && right_int) return repeat(left, right.as_integer());
  if ((right.is_string() || right.is_list()) && left_int) return repeat(right, left.as_integer());
  fail_operands("*", left, right);
}

[[noreturn]] void fail_zero_division(const std::string& message) {
  throw EvaluationError(message, "check the divisor before dividing");
}

/// CPython's float divmod: the quotient floored, the remainder with the divisor's sign.
std::pair<double, double> float_divmod(double left, double right) {
  if (right == 0.0) fail_zero_division("float division by zero");
  double remainder = std::fmod(left, right);
  double quotient = (left - remainder) / right;
  if (remainder != 0.0) {
    if ((right < 0) != (remainder < 0)) {
      remainder += right;
      quotient -= 1.0;
    }
  } else {
    remainder = std::copysign(0.0, right);
  }
  double floored = 0.0;
  if (quotient != 0.0) {
    floored = std::floor(quotient);
    if (quotient - floored > 0.5) floored += 1.0;
  } else {
    floored = std::copysign(0.0, left / right);
  }
  return {floored, remainder};
}

Value divide_and_modulo(const std::string& op, const Value& left, const Value& right) {
  if (!left.is_number() || !right.is_number()) {
    if (op == "%" && left.is_string()) {
      throw EvaluationError("printf-style formatting with % is not supported", "build the text with ~ or + instead");
    }
    fail_operands(op, left, right);
  }
  if (op == "/") {
    if (right.as_float() == 0.0) fail_zero_division("division by zero");
    return Value(left.as_float() / right.as_float());
  }
  if (both_integers(left, right)) {
    const int64_t a = left.as_integer();
    const int64_t b = right.as_integer();
    if (b == 0) fail_zero_division(op == "//" ? "integer division or modulo by zero" : "integer modulo by zero");
    if (a == std::numeric_limits<int64_t>::min() && b == -1) checked(true, 0, op);
    int64_t quotient = a / b;
    int64_t remainder = a % b;
    if (remainder != 0 && ((remainder < 0) != (b < 0))) {
      --quotient;
      remainder += b;
    }
    return op == "//" ? Value(quotient) : Value(remainder);
  }
  const auto [quotient, remainder] = float_divmod(left.as_float(), right.as_float());
  return op == "//" ? Value(quotient) : Value(remainder);
}

Value power(const Value& left, const Value& right) {
  if (!left.is_number() || !right.is_number()) fail_operands("** or pow()", left, right);
  if (both_integers(left, right) && right.as_integer() >= 0) {
    int64_t result = 1;
    int64_t base = left.as_integer();
    for (int64_t exponent = right.as_integer(); exponent > 0; exponent >>= 1) {  // by squaring
      if ((exponent & 1) != 0 && __builtin_mul_overflow(result, base, &result)) checked(true, 0, "**");
      if (exponent > 1 && __builtin_mul_overflow(base, base, &base)) checked(true, 0, "**");
    }
    return Value(result);
  }
  if (left.as_float() == 0.0 && right.as_float() < 0) {
    throw EvaluationError("0.0 cannot be raised to a negative power", "check the base before raising it");
  }
  return Value(std::pow(left.as_float(), right.as_float()));
}

}  // namespace

Value binary_operation(const std::string& op, const Value& left, const Value& right) {
  if (op == "~") {
    std::string joined = to_str(left);
    const std::string tail = to_str(right);
    check_joined_size(joined.size(), tail.size(), "strings");
    return Value(joined.append(tail));
  }
  if (left.is_undefined()) fail_undefined(left);
  if (right.is_undefined()) fail_undefined(right);
  if (op == "+") return add(left, right);
  if (op == "-") {
    if (!left.is_number() || !right.is_number()) fail_operands("-", left, right);
    if (!both_integers(left, right)) return Value(left.as_float() - right.as_float());
    int64_t difference = 0;
    const bool overflowed = __builtin_sub_overflow(left.as_integer(), right.as_integer(), &difference);
    return Value(checked(overflowed, difference, "-"));
  }
  if (op == "*") return multiply(left, right);
  if (op == "**") return power(left, right);
  return divide_and_modulo(op, left, right);
}

Value unary_operation(const std::string& op, const Value& operand) {
  if (operand.is_undefined()) fail_undefined(operand);
  if (!operand.is_number()) {
    throw EvaluationError("bad operand type for unary " + op + ": '" + type_name(operand) + "'",
                          "apply it to a number");
  }
  if (op == "+") return operand.is_boolean() ? Value(operand.as_integer()) : operand;
  if (operand.is_float()) return Value(-operand.as_float());
  if (operand.as_integer() == std::numeric_limits<int64_t>::min()) checked(true, 0, "-");
  return Value(-operand.as_integer());
}

bool contains(const Value& container, const Value& item) {
  switch (container.kind()) {
    case ValueKind::kUndefined: return false;
    case ValueKind::kString:
      if (!item.is_string()) {
        if (item.is_undefined()) fail_undefined(item);
        throw EvaluationError("'in <string>' requires string as left operand, not " + type_name(item),
                              "test a string against the string");
      }
      return container.as_string().find(item.as_string()) != std::string::npos;
    case ValueKind::kList:
      for (const Value& element : container.as_list().items) {
        if (equals(element, item)) return true;
      }
      return false;
    case ValueKind::kDict:
      if (item.is_list() || item.is_dict()) {
        throw EvaluationError("unhashable type: '" + type_name(item) + "'", "test a string or number key");
      }
      return container.as_dict().find(item) != nullptr;
    default:
      throw EvaluationError("argument of type '" + type_name(container) + "' is not iterable",
                            "test membership in a string, list or dict");
  }
}

ValueList iterate(const Value& value) {
  switch (value.kind()) {
    case ValueKind::kUndefined: return {};
    case ValueKind::kList: return value.as_list().items;
    case ValueKind::kDict: {
      ValueList keys;
      keys.reserve(value.as_dict().size());
      for (const auto& entry : value.as_dict().entries()) keys.push_back(entry.first);
      return keys;
    }
    case ValueKind::kString: {
      ValueList characters;
      for (const char32_t c : code_points_of(value.as_string())) characters.emplace_back(utf8_of(c));
      return characters;
    }
    default:
      throw EvaluationError("'" + type_name(value) + "' object is not iterable", "loop over a list, dict or string");
  }
}

int64_t length_of(const Value& value) {
  switch (value.kind()) {
    case ValueKind::kUndefined: return 0;
    case ValueKind::kString: return static_cast<int64_t>(code_point_count(value.as_string()));
    case ValueKind::kList: return static_cast<int64_t>(value.as_list().items.size());
    case ValueKind::kDict: return static_cast<int64_t>(value.as_dict().size());
    case ValueKind::kNamespace: break;
    default: break;
  }
  throw EvaluationError("object of type '" + type_name(value) + "' has no len()",
                        "take the length of a string, list or dict");
}

}  // namespace graphed::jinja
