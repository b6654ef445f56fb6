// jinja/template.cpp — Template: tokenize, parse, check that every filter and test exists (jinja2 fails
// at compile time too), and render with the context's variables over the globals.
#include "graphed/jinja/template.h"

#include "graphed/jinja/filters.h"
#include "graphed/jinja/globals.h"
#include "graphed/jinja/json_values.h"
#include "graphed/jinja/lexer.h"
#include "graphed/jinja/renderer.h"
#include "graphed/jinja/syntax_tree.h"
#include "graphed/jinja/value_tests.h"

namespace graphed::jinja {
namespace {

/// How deep a context may nest (messages -> tool_calls -> function -> arguments -> ...).
constexpr int kMaxContextDepth = 256;

std::string format_message(const std::string& problem, const std::string& fix, int line, int column,
                           bool raised_by_template) {
  std::string message = line > 0 ? "template line " + std::to_string(line) + ", column " + std::to_string(column) + ": "
                                 : std::string("template: ");
  if (raised_by_template) return message + "the template raised an error: " + problem;
  message += problem;
  if (!fix.empty()) message += "; fix: " + fix;
  return message;
}

void check_names(const Expression& expression) {
  if (expression.kind == ExpressionKind::kFilter && !has_filter(expression.name)) {
    throw TemplateError("no filter named '" + expression.name + "'",
                        "use a jinja2 builtin filter (trim, tojson, length, join, default, ...)",
                        expression.location.line, expression.location.column);
  }
  if (expression.kind == ExpressionKind::kTest && !has_test(expression.name)) {
    throw TemplateError("no test named '" + expression.name + "'",
                        "use a jinja2 builtin test (defined, none, string, mapping, ...)", expression.location.line,
                        expression.location.column);
  }
  for (const ExpressionPointer& operand : expression.operands) {
    if (operand) check_names(*operand);
  }
  for (const Argument& argument : expression.arguments) check_names(*argument.value);
}

void check_names(const NodeList& nodes) {
  for (const Node& node : nodes) {
    for (const Expression* expression : {node.expression.get(), node.condition.get()}) {
      if (expression != nullptr) check_names(*expression);
    }
    for (const Branch& branch : node.branches) {
      if (branch.condition) check_names(*branch.condition);
      check_names(branch.body);
    }
    for (const Parameter& parameter : node.parameters) {
      if (parameter.default_value) check_names(*parameter.default_value);
    }
    check_names(node.body);
    check_names(node.else_body);
  }
}

}  // namespace

TemplateError::TemplateError(const std::string& problem, const std::string& fix, int line, int column,
                             bool raised_by_template)
    : Error(format_message(problem, fix, line, column, raised_by_template)),
      problem_(problem),
      line_(line),
      column_(column),
      raised_by_template_(raised_by_template) {}

struct Template::Impl {
  NodeList nodes;
  TemplateOptions options;
};

Template::Template(std::string source, TemplateOptions options) {
  auto impl = std::make_shared<Impl>();
  impl->nodes = parse_template(tokenize(source));
  impl->options = options;
  check_names(impl->nodes);
  impl_ = std::move(impl);
}

Template::~Template() = default;
Template::Template(const Template&) = default;
Template& Template::operator=(const Template&) = default;

std::string Template::render(const nlohmann::ordered_json& context) const {
  if (!context.is_object()) {
    throw TemplateError("the render context must be a JSON object, got " + std::string(context.type_name()),
                        "pass an object such as {\"messages\": [...]}", 0, 0);
  }
  Dict variables = make_globals();
  try {
    const Value values = value_from_json(context, kMaxContextDepth);
    for (const auto& [name, value] : values.as_dict().entries()) variables.set(name, value);
  } catch (const EvaluationError& error) {
    throw TemplateError(error.what(), error.fix(), 0, 0);
  }
  return render_nodes(impl_->nodes, variables, impl_->options);
}

}  // namespace graphed::jinja
