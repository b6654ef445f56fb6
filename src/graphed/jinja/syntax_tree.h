// jinja/syntax_tree.h — the parsed template: Expression (literals, names, operators, attribute and
// item access, slices, calls, filters, tests) and Node (text, {{ }} output and the block statements).
// Built by parse_template(), read by the renderer; immutable after parsing.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "graphed/jinja/lexer.h"
#include "graphed/jinja/value.h"

namespace graphed::jinja {

struct Expression;
using ExpressionPointer = std::unique_ptr<Expression>;

enum class ExpressionKind {
  kLiteral,      // `literal`
  kName,         // variable `name`
  kList,         // operands: items
  kTuple,        // operands: items
  kDict,         // operands: key0, value0, key1, value1, ...
  kAttribute,    // operands[0].name
  kItem,         // operands[0][operands[1]]
  kSlice,        // operands[0][operands[1]:operands[2]:operands[3]] (missing parts are null)
  kCall,         // operands[0](arguments)
  kFilter,       // operands[0] | name(arguments)
  kTest,         // operands[0] is [not] name(arguments)
  kUnary,        // name ("-" or "+") operands[0]
  kNot,          // not operands[0]
  kBinary,       // operands[0] name operands[1]: + - * / // % ** ~
  kAnd,          // operands[0] and operands[1]
  kOr,           // operands[0] or operands[1]
  kCompare,      // operands[0] compare_operators[0] operands[1] ... (Python chains)
  kConditional,  // operands[0] if operands[1] else operands[2] (else part may be null)
  kBlockInput,   // the rendered body of a {% filter %} or {% set %} block, as its filter chain's subject
};

/// One call argument; `keyword` is empty for a positional one.
struct Argument {
  std::string keyword;
  ExpressionPointer value;
};

struct Expression {
  ExpressionKind kind = ExpressionKind::kLiteral;
  SourceLocation location;
  Value literal;
  std::string name;
  std::vector<ExpressionPointer> operands;
  std::vector<Argument> arguments;
  std::vector<std::string> compare_operators;  // "==", "!=", "<", "<=", ">", ">=", "in", "not in"
  bool negated = false;                        // kTest: `is not`
  int height = 1;                              // 1 + the tallest operand or argument (bounded by the parser)
};

struct Node;
using NodeList = std::vector<Node>;

enum class NodeKind {
  kText,         // text
  kOutput,       // {{ expression }}
  kIf,           // branches
  kFor,          // for targets in expression [if condition]: body [else: else_body]
  kSet,          // set targets = expression, or set targets[0].attribute = expression
  kSetBlock,     // set targets[0] [| filters]: body (the filters are `expression`, may be null)
  kMacro,        // macro name(parameters): body
  kCallBlock,    // call[(parameters)] expression: body (the body is caller())
  kFilterBlock,  // filter expression: body
  kBreak,
  kContinue,
};

/// A condition and the nodes it guards; the else branch has no condition.
struct Branch {
  ExpressionPointer condition;
  NodeList body;
};

/// A macro parameter and its default (null when required).
struct Parameter {
  std::string name;
  ExpressionPointer default_value;
};

struct Node {
  NodeKind kind = NodeKind::kText;
  SourceLocation location;
  std::string text;
  ExpressionPointer expression;
  ExpressionPointer condition;
  std::vector<Branch> branches;
  std::vector<std::string> targets;
  std::string attribute;
  std::string name;
  std::vector<Parameter> parameters;
  NodeList body;
  NodeList else_body;
};

/// Parses tokens into nodes. Throws TemplateError with the line and column of the first syntax error.
NodeList parse_template(const std::vector<Token>& tokens);

}  // namespace graphed::jinja
