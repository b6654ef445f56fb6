// jinja/parser.cpp — parse_template(): tokens -> nodes for text, {{ }} and the tags if/elif/else, for,
// set, macro, call, filter, break/continue and generation (kept in place), with syntax errors that name
// the line and column and the fix. Expressions are parsed in expression_parser.cpp.
#include "graphed/jinja/detail/parser.h"

#include <algorithm>

#include "graphed/jinja/python_text.h"
#include "graphed/jinja/template.h"

namespace graphed::jinja {
namespace detail {
namespace {

std::string tag_text(const std::string& name) { return "{% " + name + " %}"; }

bool contains(const std::vector<std::string>& names, const std::string& name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

bool is_closing_tag(const std::string& name) { return name.rfind("end", 0) == 0 || name == "else" || name == "elif"; }

}  // namespace

Parser::DepthGuard::DepthGuard(Parser& parser, SourceLocation location) : parser_(parser) {
  if (++parser_.depth_ > kMaxDepth) {
    parser_.fail("the template nests expressions or blocks more than " + std::to_string(kMaxDepth) + " levels deep",
                 "split the expression or block into smaller ones", location);
  }
}

ExpressionPointer Parser::checked(ExpressionPointer expression) const {
  int height = 0;
  for (const ExpressionPointer& operand : expression->operands) {
    if (operand) height = std::max(height, operand->height);
  }
  for (const Argument& argument : expression->arguments) height = std::max(height, argument.value->height);
  expression->height = height + 1;
  if (expression->height > kMaxHeight) {
    fail("the expression nests more than " + std::to_string(kMaxHeight) + " operations deep",
         "split it with {% set %} into smaller expressions", expression->location);
  }
  return expression;
}

NodeList Parser::parse() {
  std::string end_name;
  return parse_body(OpenBlock{}, &end_name);
}

bool Parser::skip_operator(const char* op) {
  if (!at_operator(op)) return false;
  advance();
  return true;
}

bool Parser::skip_name(const char* name) {
  if (!at_name(name)) return false;
  advance();
  return true;
}

void Parser::fail(const std::string& problem, const std::string& fix, SourceLocation location) const {
  throw TemplateError(problem, fix, location.line, location.column);
}

std::string Parser::describe(const Token& token) {
  switch (token.kind) {
    case TokenKind::kText: return "template text";
    case TokenKind::kVariableBegin: return "'{{'";
    case TokenKind::kVariableEnd: return "'}}'";
    case TokenKind::kBlockBegin: return "'{%'";
    case TokenKind::kBlockEnd: return "'%}'";
    case TokenKind::kName: return "'" + token.text + "'";
    case TokenKind::kString: return "string " + python_string_repr(token.text);
    case TokenKind::kInteger:
    case TokenKind::kFloat: return "number " + token.text;
    case TokenKind::kOperator: return "'" + token.text + "'";
    case TokenKind::kEnd: return "end of template";
  }
  return "token";
}

void Parser::expect_operator(const char* op, const std::string& context) {
  if (skip_operator(op)) return;
  fail("expected '" + std::string(op) + "' " + context + ", got " + describe(current()),
       "write '" + std::string(op) + "' there", current().location);
}

std::string Parser::expect_name(const std::string& context) {
  if (current().kind != TokenKind::kName) {
    fail("expected a name " + context + ", got " + describe(current()), "write a name there", current().location);
  }
  std::string name = current().text;
  advance();
  return name;
}

void Parser::expect_block_end(const std::string& tag) {
  if (current().kind == TokenKind::kBlockEnd) {
    advance();
    return;
  }
  fail("expected '%}' to end the {% " + tag + " %} tag, got " + describe(current()),
       "close the tag with %} (or remove what is written before it)", current().location);
}

NodeList Parser::parse_body(const OpenBlock& block, std::string* end_name) {
  DepthGuard guard(*this, block.location);
  NodeList nodes;
  while (true) {
    const Token& token = current();
    switch (token.kind) {
      case TokenKind::kText: {
        Node node;
        node.kind = NodeKind::kText;
        node.location = token.location;
        node.text = token.text;
        nodes.push_back(std::move(node));
        advance();
        break;
      }
      case TokenKind::kVariableBegin: {
        Node node;
        node.kind = NodeKind::kOutput;
        node.location = token.location;
        advance();
        node.expression = parse_tuple(true);
        if (current().kind != TokenKind::kVariableEnd) {
          fail("expected '}}' to end the expression, got " + describe(current()),
               "close the expression with }} (or join its parts with an operator)", current().location);
        }
        advance();
        nodes.push_back(std::move(node));
        break;
      }
      case TokenKind::kBlockBegin:
        if (following().kind == TokenKind::kName && contains(block.end_names, following().text)) {
          advance();
          *end_name = current().text;
          advance();
          return nodes;
        }
        parse_statement(nodes, block);
        break;
      case TokenKind::kEnd:
        if (block.keyword.empty()) return nodes;
        fail("unexpected end of template: the '" + block.keyword + "' block opened at line " +
                 std::to_string(block.location.line) + ", column " + std::to_string(block.location.column) +
                 " is not closed",
             "add " + tag_text(block.end_names.back()), token.location);
      default: fail("unexpected " + describe(token) + " outside a tag", "remove it", token.location);
    }
  }
}

void Parser::fail_unexpected_tag(const Token& tag, const OpenBlock& enclosing) {
  const std::string& name = tag.text;
  if (!is_closing_tag(name)) {
    fail("unknown tag '" + name + "'",
         "use one of if, for, set, macro, call, filter, raw, break, continue (graphed's Jinja subset has no "
         "extends, include, import, block or with)",
         tag.location);
  }
  if (enclosing.keyword.empty()) {
    fail("unexpected " + tag_text(name) + ": no block is open that it could close",
         "remove it, or open the matching block before it", tag.location);
  }
  std::string expected;
  for (const std::string& end : enclosing.end_names) expected += (expected.empty() ? "" : " or ") + tag_text(end);
  fail("unexpected " + tag_text(name) + " inside the '" + enclosing.keyword + "' block opened at line " +
           std::to_string(enclosing.location.line) + ", column " + std::to_string(enclosing.location.column),
       "close that block first with " + expected, tag.location);
}

void Parser::parse_statement(NodeList& nodes, const OpenBlock& enclosing) {
  const Token start = current();
  advance();
  if (current().kind != TokenKind::kName) {
    fail("expected a tag name after '{%', got " + describe(current()), "write a tag such as {% if ... %}",
         current().location);
  }
  const Token tag = current();
  advance();
  const std::string& name = tag.text;
  if (name == "if") {
    nodes.push_back(parse_if(start));
  } else if (name == "for") {
    nodes.push_back(parse_for(start));
  } else if (name == "set") {
    nodes.push_back(parse_set(start));
  } else if (name == "macro") {
    nodes.push_back(parse_macro(start));
  } else if (name == "call") {
    nodes.push_back(parse_call_block(start));
  } else if (name == "filter") {
    nodes.push_back(parse_filter_block(start));
  } else if (name == "break" || name == "continue") {
    if (loop_depth_ == 0) fail(tag_text(name) + " outside a for loop", "move it inside {% for %}", tag.location);
    expect_block_end(name);
    Node node;
    node.kind = name == "break" ? NodeKind::kBreak : NodeKind::kContinue;
    node.location = start.location;
    nodes.push_back(std::move(node));
  } else if (name == "generation") {
    // transformers' AssistantTracker tag: only marks assistant text, so its body renders in place.
    expect_block_end(name);
    std::string end_name;
    NodeList body = parse_body(OpenBlock{"generation", start.location, {"endgeneration"}}, &end_name);
    expect_block_end(end_name);
    for (Node& node : body) nodes.push_back(std::move(node));
  } else {
    fail_unexpected_tag(tag, enclosing);
  }
}

Node Parser::parse_if(const Token& start) {
  Node node;
  node.kind = NodeKind::kIf;
  node.location = start.location;
  const OpenBlock block{"if", start.location, {"elif", "else", "endif"}};
  std::string end_name = "if";
  while (true) {
    Branch branch;
    branch.condition = parse_tuple(false);
    expect_block_end(end_name);
    branch.body = parse_body(block, &end_name);
    node.branches.push_back(std::move(branch));
    if (end_name == "elif") continue;
    if (end_name == "else") {
      expect_block_end("else");
      Branch otherwise;
      otherwise.body = parse_body(OpenBlock{"if", start.location, {"endif"}}, &end_name);
      node.branches.push_back(std::move(otherwise));
    }
    expect_block_end(end_name);
    return node;
  }
}

std::vector<std::string> Parser::parse_assign_targets(const char* stop_name) {
  const bool parenthesized = skip_operator("(");
  std::vector<std::string> targets;
  while (true) {
    targets.push_back(expect_name("to assign to"));
    if (!skip_operator(",")) break;
    if (at_operator(")") || at_operator("=") || (stop_name != nullptr && at_name(stop_name))) break;
  }
  if (parenthesized) expect_operator(")", "after the names to assign to");
  return targets;
}

Node Parser::parse_for(const Token& start) {
  Node node;
  node.kind = NodeKind::kFor;
  node.location = start.location;
  node.targets = parse_assign_targets("in");
  if (!skip_name("in")) {
    fail("expected 'in' after the loop variables, got " + describe(current()),
         "write {% for item in items %} (or {% for key, value in mapping.items() %})", current().location);
  }
  node.expression = parse_tuple(false);
  if (skip_name("if")) node.condition = parse_expression(true);
  if (at_name("recursive")) {
    fail("recursive loops are not supported", "write the nesting out with a macro instead", current().location);
  }
  expect_block_end("for");
  ++loop_depth_;
  std::string end_name;
  node.body = parse_body(OpenBlock{"for", start.location, {"endfor", "else"}}, &end_name);
  --loop_depth_;
  if (end_name == "else") {
    expect_block_end("else");
    node.else_body = parse_body(OpenBlock{"for", start.location, {"endfor"}}, &end_name);
  }
  expect_block_end(end_name);
  return node;
}

Node Parser::parse_set(const Token& start) {
  Node node;
  node.kind = NodeKind::kSet;
  node.location = start.location;
  if (current().kind == TokenKind::kName && following().kind == TokenKind::kOperator && following().text == ".") {
    node.targets.push_back(current().text);
    advance();
    advance();
    node.attribute = expect_name("after '.' in {% set %}");
    expect_operator("=", "after the attribute to set");
    node.expression = parse_tuple(true);
    expect_block_end("set");
    return node;
  }
  node.targets = parse_assign_targets(nullptr);
  if (skip_operator("=")) {
    node.expression = parse_tuple(true);
    expect_block_end("set");
    return node;
  }
  if (node.targets.size() != 1) {
    fail("a {% set %} block assigns to one name, got " + std::to_string(node.targets.size()),
         "write {% set name %}...{% endset %}", start.location);
  }
  node.kind = NodeKind::kSetBlock;
  if (at_operator("|")) {
    auto input = std::make_unique<Expression>();
    input->kind = ExpressionKind::kBlockInput;
    input->location = current().location;
    node.expression = parse_filter(std::move(input));
  }
  expect_block_end("set");
  std::string end_name;
  node.body = parse_body(OpenBlock{"set", start.location, {"endset"}}, &end_name);
  expect_block_end(end_name);
  return node;
}

std::vector<Parameter> Parser::parse_parameters() {
  expect_operator("(", "to start the parameter list");
  std::vector<Parameter> parameters;
  while (!skip_operator(")")) {
    if (!parameters.empty()) expect_operator(",", "between parameters");
    if (skip_operator(")")) break;
    Parameter parameter;
    const SourceLocation location = current().location;
    parameter.name = expect_name("for a parameter");
    if (skip_operator("=")) {
      parameter.default_value = parse_expression(true);
    } else if (!parameters.empty() && parameters.back().default_value) {
      fail("parameter '" + parameter.name + "' without a default follows one with a default",
           "give it a default or move it before the parameters with defaults", location);
    }
    parameters.push_back(std::move(parameter));
  }
  return parameters;
}

Node Parser::parse_macro(const Token& start) {
  Node node;
  node.kind = NodeKind::kMacro;
  node.location = start.location;
  node.name = expect_name("for the macro");
  node.parameters = parse_parameters();
  expect_block_end("macro");
  node.body = parse_function_body("macro", start);
  return node;
}

Node Parser::parse_call_block(const Token& start) {
  Node node;
  node.kind = NodeKind::kCallBlock;
  node.location = start.location;
  if (at_operator("(")) node.parameters = parse_parameters();
  node.expression = parse_expression(true);
  if (node.expression->kind != ExpressionKind::kCall) {
    fail("{% call %} needs a macro call such as {% call my_macro(arg) %}", "call a macro after 'call'",
         node.expression->location);
  }
  expect_block_end("call");
  node.body = parse_function_body("call", start);
  return node;
}

NodeList Parser::parse_function_body(const std::string& block, const Token& start) {
  const int saved_loop_depth = loop_depth_;
  loop_depth_ = 0;
  std::string end_name;
  NodeList body = parse_body(OpenBlock{block, start.location, {"end" + block}}, &end_name);
  loop_depth_ = saved_loop_depth;
  expect_block_end(end_name);
  return body;
}

Node Parser::parse_filter_block(const Token& start) {
  Node node;
  node.kind = NodeKind::kFilterBlock;
  node.location = start.location;
  auto input = std::make_unique<Expression>();
  input->kind = ExpressionKind::kBlockInput;
  input->location = current().location;
  node.expression = parse_filter(parse_filter_call(std::move(input)));
  expect_block_end("filter");
  std::string end_name;
  node.body = parse_body(OpenBlock{"filter", start.location, {"endfilter"}}, &end_name);
  expect_block_end(end_name);
  return node;
}

}  // namespace detail

NodeList parse_template(const std::vector<Token>& tokens) { return detail::Parser(tokens).parse(); }

}  // namespace graphed::jinja
