// jinja/expression_evaluator.cpp — the expression half of the Renderer: names, literals, attribute/item/
// slice access, calls, filters, tests, operators (`and`/`or` return an operand), chained comparisons and
// `a if b else c`; each failure becomes a TemplateError at the failing expression's line and column.
#include "graphed/jinja/attributes.h"
#include "graphed/jinja/detail/renderer.h"
#include "graphed/jinja/filters.h"
#include "graphed/jinja/operators.h"
#include "graphed/jinja/python_text.h"
#include "graphed/jinja/value_tests.h"

namespace graphed::jinja::detail {

namespace {

/// Nested evaluations (expressions inside macros inside expressions ...) a render may stack up; keeps the
/// C++ stack bounded whatever the template does.
constexpr int kMaxEvaluationDepth = 1000;

/// Counts one level of evaluation for as long as it lives.
class EvaluationLevel {
 public:
  EvaluationLevel(int& depth, SourceLocation location) : depth_(depth) {
    if (++depth_ > kMaxEvaluationDepth) {
      --depth_;
      throw TemplateError(
          "expressions and macro calls nest more than " + std::to_string(kMaxEvaluationDepth) + " levels deep",
          "check the template for a macro that calls itself", location.line, location.column);
    }
  }
  ~EvaluationLevel() { --depth_; }
  EvaluationLevel(const EvaluationLevel&) = delete;
  EvaluationLevel& operator=(const EvaluationLevel&) = delete;

 private:
  int& depth_;
};

}  // namespace

Value Renderer::evaluate(const Expression& expression, Scope& scope) {
  const EvaluationLevel level(evaluation_depth_, expression.location);
  try {
    return evaluate_unguarded(expression, scope);
  } catch (const EvaluationError& error) {
    throw error_at(error, expression.location);
  }
}

Arguments Renderer::evaluate_arguments(const std::vector<Argument>& arguments, Scope& scope) {
  Arguments values;
  for (const Argument& argument : arguments) {
    Value value = evaluate(*argument.value, scope);
    if (argument.keyword.empty()) {
      values.positional.push_back(std::move(value));
    } else {
      values.keyword.emplace_back(argument.keyword, std::move(value));
    }
  }
  return values;
}

Value Renderer::evaluate_call(const Expression& expression, Scope& scope, const Value* caller) {
  const Value callee = evaluate(*expression.operands.front(), scope);
  Arguments arguments = evaluate_arguments(expression.arguments, scope);
  if (caller != nullptr) arguments.keyword.emplace_back("caller", *caller);
  return guarded(expression.location, [&] {
    if (callee.is_undefined()) fail_undefined(callee);
    if (!callee.is_callable()) {
      throw EvaluationError("'" + type_name(callee) + "' object is not callable", "call a function, method or macro");
    }
    return callee.as_callable().call(arguments);
  });
}

Value Renderer::evaluate_compare(const Expression& expression, Scope& scope) {
  Value left = evaluate(*expression.operands[0], scope);
  for (std::size_t i = 0; i < expression.compare_operators.size(); ++i) {
    Value right = evaluate(*expression.operands[i + 1], scope);
    const std::string& op = expression.compare_operators[i];
    bool holds = false;
    if (op == "==") {
      holds = equals(left, right);
    } else if (op == "!=") {
      holds = !equals(left, right);
    } else if (op == "in" || op == "not in") {
      holds = contains(right, left) == (op == "in");
    } else {
      const int order = compare(left, right, op);
      holds = op == "<" ? order < 0 : op == "<=" ? order <= 0 : op == ">" ? order > 0 : order >= 0;
    }
    if (!holds) return Value(false);
    left = std::move(right);
  }
  return Value(true);
}

namespace {

Value unhashable_checked(const Value& key) {
  if (key.is_list() && !key.as_list().is_tuple) throw EvaluationError("unhashable type: 'list'", "use a string key");
  if (key.is_dict()) throw EvaluationError("unhashable type: 'dict'", "use a string key");
  return key;
}

}  // namespace

Value Renderer::evaluate_unguarded(const Expression& expression, Scope& scope) {
  const auto& operands = expression.operands;
  switch (expression.kind) {
    case ExpressionKind::kLiteral: return expression.literal;
    case ExpressionKind::kName: {
      const Value* value = scope.find(expression.name);
      return value != nullptr ? *value : Value::undefined(python_string_repr(expression.name) + " is undefined");
    }
    case ExpressionKind::kList:
    case ExpressionKind::kTuple: {
      ValueList items;
      items.reserve(operands.size());
      for (const ExpressionPointer& item : operands) items.push_back(evaluate(*item, scope));
      return expression.kind == ExpressionKind::kList ? Value::list(std::move(items)) : Value::tuple(std::move(items));
    }
    case ExpressionKind::kDict: {
      Dict dict;
      for (std::size_t i = 0; i + 1 < operands.size(); i += 2) {
        Value key = evaluate(*operands[i], scope);
        dict.set(guarded(operands[i]->location, [&] { return unhashable_checked(key); }),
                 evaluate(*operands[i + 1], scope));
      }
      return Value::dict(std::move(dict));
    }
    case ExpressionKind::kAttribute: return get_attribute(evaluate(*operands[0], scope), expression.name);
    case ExpressionKind::kItem: {
      const Value object = evaluate(*operands[0], scope);
      return get_item(object, evaluate(*operands[1], scope));
    }
    case ExpressionKind::kSlice: {
      const Value object = evaluate(*operands[0], scope);
      auto bound = [&](const ExpressionPointer& part) { return part ? evaluate(*part, scope) : Value::none(); };
      const Value start = bound(operands[1]);
      const Value stop = bound(operands[2]);
      return get_slice(object, start, stop, bound(operands[3]));
    }
    case ExpressionKind::kCall: return evaluate_call(expression, scope, nullptr);
    case ExpressionKind::kFilter: {
      const Value subject = evaluate(*operands[0], scope);
      return apply_filter(expression.name, subject, evaluate_arguments(expression.arguments, scope));
    }
    case ExpressionKind::kTest: {
      const Value subject = evaluate(*operands[0], scope);
      const bool passes = apply_test(expression.name, subject, evaluate_arguments(expression.arguments, scope));
      return Value(passes != expression.negated);
    }
    case ExpressionKind::kUnary: return unary_operation(expression.name, evaluate(*operands[0], scope));
    case ExpressionKind::kNot: return Value(!is_true(evaluate(*operands[0], scope)));
    case ExpressionKind::kBinary: {
      const Value left = evaluate(*operands[0], scope);
      return binary_operation(expression.name, left, evaluate(*operands[1], scope));
    }
    case ExpressionKind::kAnd: {
      Value left = evaluate(*operands[0], scope);
      return is_true(left) ? evaluate(*operands[1], scope) : left;
    }
    case ExpressionKind::kOr: {
      Value left = evaluate(*operands[0], scope);
      return is_true(left) ? left : evaluate(*operands[1], scope);
    }
    case ExpressionKind::kCompare: return evaluate_compare(expression, scope);
    case ExpressionKind::kConditional:
      if (is_true(evaluate(*operands[1], scope))) return evaluate(*operands[0], scope);
      if (operands[2]) return evaluate(*operands[2], scope);
      return Value::undefined("the inline if-expression on line " + std::to_string(expression.location.line) +
                              " evaluated to false and no else section was defined.");
    case ExpressionKind::kBlockInput: return block_inputs_.back();
  }
  return Value();
}

}  // namespace graphed::jinja::detail
