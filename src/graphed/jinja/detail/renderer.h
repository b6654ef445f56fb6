// jinja/detail/renderer.h — Scope and the Renderer class behind render_nodes(), shared by renderer.cpp
// (statements) and expression_evaluator.cpp (expressions). Internal to graphed_jinja.
#pragma once

#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "graphed/jinja/syntax_tree.h"
#include "graphed/jinja/template.h"

namespace graphed::jinja::detail {

/// Variables of one scope; lookups fall through to the enclosing scopes, assignments stay here.
class Scope : public std::enable_shared_from_this<Scope> {
 public:
  explicit Scope(std::shared_ptr<Scope> parent) : parent_(std::move(parent)) {}
  /// The innermost variable of that name, or nullptr.
  const Value* find(const std::string& name) const;
  void set(const std::string& name, Value value);

 private:
  std::shared_ptr<Scope> parent_;
  std::unordered_map<std::string, Value> variables_;
};

/// How a statement list ended: normally, or at {% break %} / {% continue %}.
enum class Flow { kNormal, kBreak, kContinue };

class Renderer {
 public:
  Renderer(const TemplateOptions& options, std::string& output) : options_(options), output_(&output) {}
  Flow render_nodes(const NodeList& nodes, const std::shared_ptr<Scope>& scope);

 private:
  // Statements (renderer.cpp).
  Flow render_node(const Node& node, const std::shared_ptr<Scope>& scope);
  void render_for(const Node& node, const std::shared_ptr<Scope>& scope);
  void render_set(const Node& node, const std::shared_ptr<Scope>& scope);
  void render_call_block(const Node& node, const std::shared_ptr<Scope>& scope);
  void assign(Scope& scope, const std::vector<std::string>& targets, const Value& value, SourceLocation location);
  std::string render_to_string(const NodeList& nodes, const std::shared_ptr<Scope>& scope);
  Value apply_block_filters(const Expression& filters, const std::string& text, Scope& scope);
  Value make_macro(const std::string& name, const std::vector<Parameter>& parameters, const NodeList& body,
                   const std::shared_ptr<Scope>& scope);
  Value call_macro(const std::string& name, const std::vector<Parameter>& parameters, const NodeList& body,
                   Scope& closure, const Arguments& arguments);
  void write(const std::string& text, SourceLocation location);

  // Expressions (expression_evaluator.cpp).
  Value evaluate(const Expression& expression, Scope& scope);
  Value evaluate_unguarded(const Expression& expression, Scope& scope);
  Value evaluate_compare(const Expression& expression, Scope& scope);
  /// A kCall expression; `caller` (may be null) is passed as the keyword argument caller=.
  Value evaluate_call(const Expression& expression, Scope& scope, const Value* caller);
  Arguments evaluate_arguments(const std::vector<Argument>& arguments, Scope& scope);

  static TemplateError error_at(const EvaluationError& error, SourceLocation location);

  /// Runs `function`, turning an EvaluationError into a TemplateError at `location`.
  template <typename Function>
  static auto guarded(SourceLocation location, Function function) -> decltype(function()) {
    try {
      return function();
    } catch (const EvaluationError& error) {
      throw error_at(error, location);
    }
  }

  const TemplateOptions& options_;
  std::string* output_;
  std::vector<Value> block_inputs_;               // bodies of the {% filter %}/{% set %} blocks being filtered
  std::vector<std::shared_ptr<Scope>> closures_;  // scopes that macros close over, alive for the render
  int call_depth_ = 0;
  int evaluation_depth_ = 0;
  int64_t loop_iterations_ = 0;
};

}  // namespace graphed::jinja::detail
