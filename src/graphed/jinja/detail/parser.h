// jinja/detail/parser.h — the recursive-descent Parser behind parse_template(), shared by
// parser.cpp (statements and token helpers) and expression_parser.cpp (expressions with jinja2's
// precedence). Internal to graphed_jinja.
#pragma once

#include <string>
#include <vector>

#include "graphed/jinja/syntax_tree.h"

namespace graphed::jinja::detail {

/// The block whose body is being parsed, for "not closed" and "unexpected end tag" messages.
struct OpenBlock {
  std::string keyword;                 // "for", "if", ... ("" at the top level)
  SourceLocation location;             // of its {%
  std::vector<std::string> end_names;  // tags that end this body: "endfor", "else", ...
};

class Parser {
 public:
  explicit Parser(const std::vector<Token>& tokens) : tokens_(tokens) {}
  NodeList parse();

  // Expressions (expression_parser.cpp), in jinja2's precedence order.
  ExpressionPointer parse_expression(bool with_conditional = true);
  /// A comma list: one expression as itself, several as a tuple (`{{ a, b }}`, `for x in a, b`).
  ExpressionPointer parse_tuple(bool with_conditional, bool explicit_parentheses = false);

 private:
  // Statements (parser.cpp).
  NodeList parse_body(const OpenBlock& block, std::string* end_name);
  NodeList parse_block_body(const OpenBlock& block, std::string* end_name);
  void parse_statement(NodeList& nodes, const OpenBlock& enclosing);
  Node parse_if(const Token& start);
  Node parse_for(const Token& start);
  Node parse_set(const Token& start);
  Node parse_macro(const Token& start);
  Node parse_call_block(const Token& start);
  /// The body of a macro or call block up to its end tag: a function's body, so break and continue
  /// inside it cannot reach a loop around it.
  NodeList parse_function_body(const std::string& block, const Token& start);
  Node parse_filter_block(const Token& start);
  std::vector<std::string> parse_assign_targets(const char* stop_name);
  std::vector<Parameter> parse_parameters();
  [[noreturn]] void fail_unexpected_tag(const Token& tag, const OpenBlock& enclosing);

  // Expression levels (expression_parser.cpp).
  ExpressionPointer parse_or();
  ExpressionPointer parse_and();
  ExpressionPointer parse_not();
  ExpressionPointer parse_compare();
  ExpressionPointer parse_sum();
  ExpressionPointer parse_concat();
  ExpressionPointer parse_product();
  ExpressionPointer parse_power();
  ExpressionPointer parse_unary(bool with_filters);
  ExpressionPointer parse_primary();
  ExpressionPointer parse_collection(const char* close, ExpressionKind kind);
  ExpressionPointer parse_postfix(ExpressionPointer subject);
  ExpressionPointer parse_filters_and_tests(ExpressionPointer subject);
  ExpressionPointer parse_subscript(ExpressionPointer subject);
  ExpressionPointer parse_call(ExpressionPointer callee);
  /// `| name(args)` filters, as many as follow.
  ExpressionPointer parse_filter(ExpressionPointer subject);
  /// One filter's `name(args)` (the pipe already read).
  ExpressionPointer parse_filter_call(ExpressionPointer subject);
  ExpressionPointer parse_test(ExpressionPointer subject);
  std::vector<Argument> parse_call_arguments();
  std::string parse_dotted_name();

 public:
  // Token helpers (parser.cpp), used by both halves.
  const Token& current() const { return tokens_[index_]; }
  const Token& following() const { return tokens_[index_ + 1 < tokens_.size() ? index_ + 1 : index_]; }
  void advance() {
    if (index_ + 1 < tokens_.size()) ++index_;
  }
  bool at_operator(const char* op) const { return current().kind == TokenKind::kOperator && current().text == op; }
  bool at_name(const char* name) const { return current().kind == TokenKind::kName && current().text == name; }
  bool skip_operator(const char* op);
  bool skip_name(const char* name);
  void expect_operator(const char* op, const std::string& context);
  std::string expect_name(const std::string& context);
  void expect_block_end(const std::string& tag);
  [[noreturn]] void fail(const std::string& problem, const std::string& fix, SourceLocation location) const;
  /// "'}}'", "end of template", "name 'foo'", "string", ... as a message shows the current token.
  static std::string describe(const Token& token);

  /// Bounds the recursion of nested expressions and blocks; throws past kMaxDepth.
  class DepthGuard {
   public:
    DepthGuard(Parser& parser, SourceLocation location);
    ~DepthGuard() { --parser_.depth_; }
    DepthGuard(const DepthGuard&) = delete;
    DepthGuard& operator=(const DepthGuard&) = delete;

   private:
    Parser& parser_;
  };

 private:
  /// Sets the expression's height (1 + its tallest operand or argument) and fails past kMaxHeight: a long
  /// chain such as `a ~ b ~ c ...` or `x|f|g|...` nests to the left, and every walk of the tree (render,
  /// checks, destruction) recurses through it.
  ExpressionPointer checked(ExpressionPointer expression) const;

  static constexpr int kMaxDepth = 100;
  static constexpr int kMaxHeight = 300;
  const std::vector<Token>& tokens_;
  std::size_t index_ = 0;
  int depth_ = 0;
  int loop_depth_ = 0;  // for {% break %} and {% continue %}
};

}  // namespace graphed::jinja::detail
