// jinja/expression_parser.cpp — the expression half of the Parser, with jinja2's precedence (lowest first):
// `a if b else c`, or, and, not, comparisons and in, + -, ~, * / // %, ** (left associative), unary - +,
// postfix . [] [:] (), then filters `|f(x)` and tests `is t`, which bind tighter than binary operators.
#include <cmath>
#include <stdexcept>

#include "graphed/jinja/detail/parser.h"

namespace graphed::jinja::detail {
namespace {

ExpressionPointer make_expression(ExpressionKind kind, SourceLocation location) {
  auto expression = std::make_unique<Expression>();
  expression->kind = kind;
  expression->location = location;
  return expression;
}

ExpressionPointer make_binary(ExpressionKind kind, const std::string& op, SourceLocation location,
                              ExpressionPointer left, ExpressionPointer right) {
  auto expression = make_expression(kind, location);
  expression->name = op;
  expression->operands.push_back(std::move(left));
  expression->operands.push_back(std::move(right));
  return expression;
}

/// Where a comma list ends: a tag end or ')'; after a trailing comma also the names that follow a
/// for loop's targets or iterable (`in`, `if`, `recursive`).
bool is_tuple_end(const Parser& parser, bool after_comma) {
  const Token& token = parser.current();
  if (token.kind == TokenKind::kVariableEnd || token.kind == TokenKind::kBlockEnd || parser.at_operator(")")) {
    return true;
  }
  return after_comma && (parser.at_name("in") || parser.at_name("if") || parser.at_name("recursive"));
}

}  // namespace

ExpressionPointer Parser::parse_expression(bool with_conditional) {
  ExpressionPointer expression = parse_or();
  while (with_conditional && at_name("if")) {
    auto conditional = make_expression(ExpressionKind::kConditional, current().location);
    advance();
    conditional->operands.push_back(std::move(expression));
    conditional->operands.push_back(parse_or());
    conditional->operands.push_back(skip_name("else") ? parse_expression(true) : nullptr);
    expression = checked(std::move(conditional));
  }
  return expression;
}

ExpressionPointer Parser::parse_tuple(bool with_conditional, bool explicit_parentheses) {
  const SourceLocation location = current().location;
  std::vector<ExpressionPointer> items;
  bool is_tuple = false;
  while (!is_tuple_end(*this, !items.empty())) {
    items.push_back(parse_expression(with_conditional));
    if (!skip_operator(",")) break;
    is_tuple = true;
  }
  if (!is_tuple) {
    if (!items.empty()) return std::move(items.front());
    if (!explicit_parentheses) {
      fail("expected an expression, got " + describe(current()), "write a value or a variable there", location);
    }
  }
  auto tuple = make_expression(ExpressionKind::kTuple, location);
  tuple->operands = std::move(items);
  return checked(std::move(tuple));
}

ExpressionPointer Parser::parse_or() {
  ExpressionPointer left = parse_and();
  while (at_name("or")) {
    const SourceLocation location = current().location;
    advance();
    left = checked(make_binary(ExpressionKind::kOr, "or", location, std::move(left), parse_and()));
  }
  return left;
}

ExpressionPointer Parser::parse_and() {
  ExpressionPointer left = parse_not();
  while (at_name("and")) {
    const SourceLocation location = current().location;
    advance();
    left = checked(make_binary(ExpressionKind::kAnd, "and", location, std::move(left), parse_not()));
  }
  return left;
}

ExpressionPointer Parser::parse_not() {
  if (!at_name("not")) return parse_compare();
  DepthGuard guard(*this, current().location);
  auto negation = make_expression(ExpressionKind::kNot, current().location);
  advance();
  negation->operands.push_back(parse_not());
  return checked(std::move(negation));
}

ExpressionPointer Parser::parse_compare() {
  ExpressionPointer first = parse_sum();
  ExpressionPointer comparison;
  while (true) {
    std::string op;
    const SourceLocation location = current().location;
    if (at_operator("==") || at_operator("!=") || at_operator("<") || at_operator("<=") || at_operator(">") ||
        at_operator(">=")) {
      op = current().text;
      advance();
    } else if (at_name("in")) {
      op = "in";
      advance();
    } else if (at_name("not") && following().kind == TokenKind::kName && following().text == "in") {
      op = "not in";
      advance();
      advance();
    } else {
      break;
    }
    if (!comparison) {
      comparison = make_expression(ExpressionKind::kCompare, location);
      comparison->operands.push_back(std::move(first));
    }
    comparison->compare_operators.push_back(op);
    comparison->operands.push_back(parse_sum());
  }
  return comparison ? checked(std::move(comparison)) : std::move(first);
}

ExpressionPointer Parser::parse_sum() {
  ExpressionPointer left = parse_concat();
  while (at_operator("+") || at_operator("-")) {
    const Token op = current();
    advance();
    left = checked(make_binary(ExpressionKind::kBinary, op.text, op.location, std::move(left), parse_concat()));
  }
  return left;
}

ExpressionPointer Parser::parse_concat() {
  ExpressionPointer left = parse_product();
  while (at_operator("~")) {
    const Token op = current();
    advance();
    left = checked(make_binary(ExpressionKind::kBinary, op.text, op.location, std::move(left), parse_product()));
  }
  return left;
}

ExpressionPointer Parser::parse_product() {
  ExpressionPointer left = parse_power();
  while (at_operator("*") || at_operator("/") || at_operator("//") || at_operator("%")) {
    const Token op = current();
    advance();
    left = checked(make_binary(ExpressionKind::kBinary, op.text, op.location, std::move(left), parse_power()));
  }
  return left;
}

ExpressionPointer Parser::parse_power() {
  ExpressionPointer left = parse_unary(true);
  while (at_operator("**")) {
    const Token op = current();
    advance();
    left = checked(make_binary(ExpressionKind::kBinary, op.text, op.location, std::move(left), parse_unary(true)));
  }
  return left;
}

ExpressionPointer Parser::parse_unary(bool with_filters) {
  DepthGuard guard(*this, current().location);
  ExpressionPointer expression;
  if (at_operator("-") || at_operator("+")) {
    expression = make_expression(ExpressionKind::kUnary, current().location);
    expression->name = current().text;
    advance();
    expression->operands.push_back(parse_unary(false));
    expression = checked(std::move(expression));
  } else {
    expression = parse_primary();
  }
  expression = parse_postfix(std::move(expression));
  return with_filters ? parse_filters_and_tests(std::move(expression)) : std::move(expression);
}

ExpressionPointer Parser::parse_primary() {
  const Token token = current();
  auto literal = [&](Value value) {
    auto expression = make_expression(ExpressionKind::kLiteral, token.location);
    expression->literal = std::move(value);
    return expression;
  };
  switch (token.kind) {
    case TokenKind::kName: {
      advance();
      if (token.text == "true" || token.text == "True") return literal(Value(true));
      if (token.text == "false" || token.text == "False") return literal(Value(false));
      if (token.text == "none" || token.text == "None") return literal(Value::none());
      auto name = make_expression(ExpressionKind::kName, token.location);
      name->name = token.text;
      return name;
    }
    case TokenKind::kString: {
      std::string text;
      while (current().kind == TokenKind::kString) {  // adjacent literals join, as in Python
        text += current().text;
        advance();
      }
      return literal(Value(std::move(text)));
    }
    case TokenKind::kInteger:
      advance();
      try {
        return literal(Value(static_cast<int64_t>(std::stoll(token.text))));
      } catch (const std::out_of_range&) {
        fail("the integer " + token.text + " does not fit in 64 bits", "use a smaller number", token.location);
      }
    case TokenKind::kFloat: advance(); return literal(Value(std::strtod(token.text.c_str(), nullptr)));
    case TokenKind::kOperator:
      if (token.text == "(") {
        advance();
        ExpressionPointer inner = parse_tuple(true, true);
        expect_operator(")", "to close the '(' at line " + std::to_string(token.location.line) + ", column " +
                                 std::to_string(token.location.column));
        return inner;
      }
      if (token.text == "[") return parse_collection("]", ExpressionKind::kList);
      if (token.text == "{") return parse_collection("}", ExpressionKind::kDict);
      break;
    default: break;
  }
  fail("expected an expression, got " + describe(token), "write a value or a variable there", token.location);
}

ExpressionPointer Parser::parse_collection(const char* close, ExpressionKind kind) {
  auto collection = make_expression(kind, current().location);
  advance();
  const std::string what = kind == ExpressionKind::kList ? "list" : "dict";
  while (!skip_operator(close)) {
    if (!collection->operands.empty()) expect_operator(",", "between the " + what + "'s items");
    if (skip_operator(close)) break;
    collection->operands.push_back(parse_expression(true));
    if (kind == ExpressionKind::kDict) {
      expect_operator(":", "after a dict key");
      collection->operands.push_back(parse_expression(true));
    }
  }
  return checked(std::move(collection));
}

ExpressionPointer Parser::parse_postfix(ExpressionPointer subject) {
  while (true) {
    if (at_operator(".") || at_operator("[")) {
      subject = checked(parse_subscript(std::move(subject)));
    } else if (at_operator("(")) {
      subject = checked(parse_call(std::move(subject)));
    } else {
      return subject;
    }
  }
}

ExpressionPointer Parser::parse_call(ExpressionPointer callee) {
  // Errors of a call point at the callee's name (`raise_exception(...)`, `text.split(...)`).
  auto call = make_expression(ExpressionKind::kCall, callee->location);
  call->operands.push_back(std::move(callee));
  call->arguments = parse_call_arguments();
  return call;
}

ExpressionPointer Parser::parse_filters_and_tests(ExpressionPointer subject) {
  while (true) {
    if (at_operator("|")) {
      subject = parse_filter(std::move(subject));
    } else if (at_name("is")) {
      subject = checked(parse_test(std::move(subject)));
    } else if (at_operator("(")) {
      subject = checked(parse_call(std::move(subject)));
    } else {
      return subject;
    }
  }
}

ExpressionPointer Parser::parse_subscript(ExpressionPointer subject) {
  const Token opener = current();
  advance();
  if (opener.text == ".") {
    const Token token = current();
    if (token.kind == TokenKind::kName) {
      advance();
      auto attribute = make_expression(ExpressionKind::kAttribute, token.location);
      attribute->name = token.text;
      attribute->operands.push_back(std::move(subject));
      return attribute;
    }
    if (token.kind != TokenKind::kInteger) {
      fail("expected an attribute name or a number after '.', got " + describe(token), "write .name or .0",
           token.location);
    }
    advance();
    auto item = make_expression(ExpressionKind::kItem, opener.location);
    item->operands.push_back(std::move(subject));
    auto index = make_expression(ExpressionKind::kLiteral, token.location);
    index->literal = Value(static_cast<int64_t>(std::stoll(token.text)));
    item->operands.push_back(std::move(index));
    return item;
  }
  ExpressionPointer start;
  if (!at_operator(":")) start = parse_expression(true);
  if (!at_operator(":")) {
    if (at_operator(",")) {
      fail("a subscript with several values (a tuple key) is not supported", "index with one value",
           current().location);
    }
    expect_operator("]", "to close the subscript");
    auto item = make_expression(ExpressionKind::kItem, opener.location);
    item->operands.push_back(std::move(subject));
    item->operands.push_back(std::move(start));
    return item;
  }
  auto slice = make_expression(ExpressionKind::kSlice, opener.location);
  slice->operands.push_back(std::move(subject));
  slice->operands.push_back(std::move(start));
  advance();  // the first ':'
  ExpressionPointer stop;
  ExpressionPointer step;
  if (!at_operator("]") && !at_operator(":")) stop = parse_expression(true);
  if (skip_operator(":") && !at_operator("]")) step = parse_expression(true);
  expect_operator("]", "to close the slice");
  slice->operands.push_back(std::move(stop));
  slice->operands.push_back(std::move(step));
  return slice;
}

std::vector<Argument> Parser::parse_call_arguments() {
  advance();  // (
  std::vector<Argument> arguments;
  bool seen_keyword = false;
  while (!skip_operator(")")) {
    if (!arguments.empty()) expect_operator(",", "between call arguments");
    if (skip_operator(")")) break;
    if (at_operator("*") || at_operator("**")) {
      fail("unpacking arguments with * or ** is not supported", "pass the arguments one by one", current().location);
    }
    Argument argument;
    if (current().kind == TokenKind::kName && following().kind == TokenKind::kOperator && following().text == "=") {
      argument.keyword = current().text;
      advance();
      advance();
      seen_keyword = true;
    } else if (seen_keyword) {
      fail("a positional argument follows a keyword argument", "put positional arguments first", current().location);
    }
    argument.value = parse_expression(true);
    arguments.push_back(std::move(argument));
  }
  return arguments;
}

std::string Parser::parse_dotted_name() {
  std::string name = expect_name("for a filter or test");
  while (at_operator(".") && following().kind == TokenKind::kName) {
    advance();
    name += "." + current().text;
    advance();
  }
  return name;
}

ExpressionPointer Parser::parse_filter(ExpressionPointer subject) {
  while (skip_operator("|")) subject = checked(parse_filter_call(std::move(subject)));
  return subject;
}

ExpressionPointer Parser::parse_filter_call(ExpressionPointer subject) {
  auto filter = make_expression(ExpressionKind::kFilter, current().location);
  filter->name = parse_dotted_name();
  filter->operands.push_back(std::move(subject));
  if (at_operator("(")) filter->arguments = parse_call_arguments();
  return filter;
}

ExpressionPointer Parser::parse_test(ExpressionPointer subject) {
  auto test = make_expression(ExpressionKind::kTest, current().location);
  advance();  // is
  test->negated = skip_name("not");
  test->name = parse_dotted_name();
  test->operands.push_back(std::move(subject));
  const Token& next = current();
  const bool starts_argument = next.kind == TokenKind::kName || next.kind == TokenKind::kString ||
                               next.kind == TokenKind::kInteger || next.kind == TokenKind::kFloat || at_operator("[") ||
                               at_operator("{");
  if (at_operator("(")) {
    test->arguments = parse_call_arguments();
  } else if (starts_argument && !at_name("else") && !at_name("or") && !at_name("and")) {
    if (at_name("is")) fail("tests cannot be chained with 'is'", "join the tests with 'and'", next.location);
    Argument argument;
    argument.value = parse_postfix(parse_primary());
    test->arguments.push_back(std::move(argument));
  }
  return test;
}

}  // namespace graphed::jinja::detail
