// jinja/renderer.cpp — the statement half of the Renderer: text and {{ }} output, if, for (loop object,
// inline filter, else, break/continue), set, macros and call blocks, filter blocks, and the limits on
// output size, loop iterations and call depth. Expressions: expression_evaluator.cpp.
#include "graphed/jinja/renderer.h"

#include "graphed/jinja/detail/renderer.h"
#include "graphed/jinja/operators.h"

namespace graphed::jinja {
namespace detail {
namespace {

/// jinja2's loop object: one namespace per for loop, updated in place for each item (jinja2's LoopContext
/// is one object too), with index, index0, revindex, revindex0, first, last, length, previtem, nextitem,
/// depth, depth0 and cycle().
class LoopObject {
 public:
  explicit LoopObject(const ValueList& items) : items_(items), position_(std::make_shared<std::size_t>(0)) {
    Dict attributes;
    attributes.set(Value("length"), Value(static_cast<int64_t>(items.size())));
    attributes.set(Value("depth"), Value(1));
    attributes.set(Value("depth0"), Value(0));
    std::shared_ptr<const std::size_t> position = position_;
    attributes.set(Value("cycle"), Value::callable("loop.cycle", [position](const Arguments& arguments) {
                     if (arguments.positional.empty()) {
                       throw EvaluationError("no items for cycling given",
                                             "pass the values to cycle through: loop.cycle('a', 'b')");
                     }
                     return arguments.positional[*position % arguments.positional.size()];
                   }));
    value_ = Value::new_namespace(std::move(attributes));
  }

  /// The loop object positioned on item `index`.
  const Value& at(std::size_t index) {
    *position_ = index;
    const auto length = static_cast<int64_t>(items_.size());
    const auto position = static_cast<int64_t>(index);
    Dict& loop = value_.as_namespace().attributes;
    loop.set(Value("index"), Value(position + 1));
    loop.set(Value("index0"), Value(position));
    loop.set(Value("revindex"), Value(length - position));
    loop.set(Value("revindex0"), Value(length - position - 1));
    loop.set(Value("first"), Value(index == 0));
    loop.set(Value("last"), Value(position == length - 1));
    loop.set(Value("previtem"), index > 0 ? items_[index - 1] : Value::undefined("there is no previous item"));
    loop.set(Value("nextitem"), position + 1 < length ? items_[index + 1] : Value::undefined("there is no next item"));
    return value_;
  }

 private:
  const ValueList& items_;
  std::shared_ptr<std::size_t> position_;
  Value value_;
};

}  // namespace

const Value* Scope::find(const std::string& name) const {
  for (const Scope* scope = this; scope != nullptr; scope = scope->parent_.get()) {
    const auto found = scope->variables_.find(name);
    if (found != scope->variables_.end()) return &found->second;
  }
  return nullptr;
}

void Scope::set(const std::string& name, Value value) { variables_[name] = std::move(value); }

TemplateError Renderer::error_at(const EvaluationError& error, SourceLocation location) {
  return TemplateError(error.what(), error.fix(), location.line, location.column, error.raised_by_template());
}

void Renderer::write(const std::string& text, SourceLocation location) {
  if (output_->size() + text.size() > options_.max_output_bytes) {
    throw TemplateError("the rendered text passes the limit of " + std::to_string(options_.max_output_bytes) + " bytes",
                        "check the template for a runaway loop, or raise TemplateOptions::max_output_bytes",
                        location.line, location.column);
  }
  output_->append(text);
}

std::string Renderer::render_to_string(const NodeList& nodes, const std::shared_ptr<Scope>& scope) {
  std::string buffer;
  std::string* saved = output_;
  output_ = &buffer;
  try {
    render_nodes(nodes, scope);
  } catch (...) {
    output_ = saved;
    throw;
  }
  output_ = saved;
  return buffer;
}

Flow Renderer::render_nodes(const NodeList& nodes, const std::shared_ptr<Scope>& scope) {
  for (const Node& node : nodes) {
    const Flow flow = render_node(node, scope);
    if (flow != Flow::kNormal) return flow;
  }
  return Flow::kNormal;
}

Flow Renderer::render_node(const Node& node, const std::shared_ptr<Scope>& scope) {
  switch (node.kind) {
    case NodeKind::kText: write(node.text, node.location); return Flow::kNormal;
    case NodeKind::kOutput: {
      const Value value = evaluate(*node.expression, *scope);
      write(guarded(node.expression->location, [&] { return to_str(value); }), node.location);
      return Flow::kNormal;
    }
    case NodeKind::kIf:
      for (const Branch& branch : node.branches) {
        if (!branch.condition || is_true(evaluate(*branch.condition, *scope))) return render_nodes(branch.body, scope);
      }
      return Flow::kNormal;
    case NodeKind::kFor: render_for(node, scope); return Flow::kNormal;
    case NodeKind::kSet: render_set(node, scope); return Flow::kNormal;
    case NodeKind::kSetBlock: {
      const std::string text = render_to_string(node.body, std::make_shared<Scope>(scope));
      scope->set(node.targets.front(),
                 node.expression ? apply_block_filters(*node.expression, text, *scope) : Value(text));
      return Flow::kNormal;
    }
    case NodeKind::kMacro:
      scope->set(node.name, make_macro(node.name, node.parameters, node.body, scope));
      return Flow::kNormal;
    case NodeKind::kCallBlock: render_call_block(node, scope); return Flow::kNormal;
    case NodeKind::kFilterBlock: {
      const std::string text = render_to_string(node.body, std::make_shared<Scope>(scope));
      const Value filtered = apply_block_filters(*node.expression, text, *scope);
      write(guarded(node.location, [&] { return to_str(filtered); }), node.location);
      return Flow::kNormal;
    }
    case NodeKind::kBreak: return Flow::kBreak;
    case NodeKind::kContinue: return Flow::kContinue;
  }
  return Flow::kNormal;
}

void Renderer::assign(Scope& scope, const std::vector<std::string>& targets, const Value& value,
                      SourceLocation location) {
  if (targets.size() == 1) {
    scope.set(targets.front(), value);
    return;
  }
  const ValueList items = guarded(location, [&] { return iterate(value); });
  if (items.size() != targets.size()) {
    const std::string expected = std::to_string(targets.size());
    const std::string problem = items.size() < targets.size() ? "not enough values to unpack (expected " + expected +
                                                                    ", got " + std::to_string(items.size()) + ")"
                                                              : "too many values to unpack (expected " + expected + ")";
    throw TemplateError(problem, "unpack a sequence of exactly " + expected + " items", location.line, location.column);
  }
  for (std::size_t i = 0; i < targets.size(); ++i) scope.set(targets[i], items[i]);
}

void Renderer::render_for(const Node& node, const std::shared_ptr<Scope>& scope) {
  const Value iterable = evaluate(*node.expression, *scope);
  ValueList items = guarded(node.expression->location, [&] { return iterate(iterable); });
  if (node.condition) {  // the inline `if` filters before loop.length and loop.index are known
    ValueList kept;
    for (const Value& item : items) {
      Scope filter_scope(scope);
      assign(filter_scope, node.targets, item, node.location);
      if (is_true(evaluate(*node.condition, filter_scope))) kept.push_back(item);
    }
    items = std::move(kept);
  }
  if (items.empty()) {
    render_nodes(node.else_body, std::make_shared<Scope>(scope));
    return;
  }
  LoopObject loop(items);
  for (std::size_t i = 0; i < items.size(); ++i) {
    if (++loop_iterations_ > options_.max_loop_iterations) {
      throw TemplateError(
          "the template ran more than " + std::to_string(options_.max_loop_iterations) + " loop iterations",
          "check the template for a runaway loop, or raise TemplateOptions::max_loop_iterations", node.location.line,
          node.location.column);
    }
    const auto iteration = std::make_shared<Scope>(scope);
    assign(*iteration, node.targets, items[i], node.location);
    iteration->set("loop", loop.at(i));
    if (render_nodes(node.body, iteration) == Flow::kBreak) break;
  }
}

void Renderer::render_set(const Node& node, const std::shared_ptr<Scope>& scope) {
  const Value value = evaluate(*node.expression, *scope);
  if (node.attribute.empty()) {
    assign(*scope, node.targets, value, node.location);
    return;
  }
  const Value* target = scope->find(node.targets.front());
  if (target == nullptr || !target->is_namespace()) {
    throw TemplateError("cannot assign attribute on non-namespace object '" + node.targets.front() + "'",
                        "create it first with {% set " + node.targets.front() + " = namespace() %}", node.location.line,
                        node.location.column);
  }
  target->as_namespace().attributes.set(Value(node.attribute), value);
}

Value Renderer::apply_block_filters(const Expression& filters, const std::string& text, Scope& scope) {
  block_inputs_.push_back(Value(text));
  Value result;
  try {
    result = evaluate(filters, scope);
  } catch (...) {
    block_inputs_.pop_back();
    throw;
  }
  block_inputs_.pop_back();
  return result;
}

Value Renderer::make_macro(const std::string& name, const std::vector<Parameter>& parameters, const NodeList& body,
                           const std::shared_ptr<Scope>& scope) {
  // The renderer keeps the defining scope alive; the callable holds a plain pointer, so a macro stored
  // in the scope it closes over makes no reference cycle.
  closures_.push_back(scope);
  Scope* closure = scope.get();
  return Value::callable(name, [this, name, &parameters, &body, closure](const Arguments& arguments) {
    return call_macro(name, parameters, body, *closure, arguments);
  });
}

Value Renderer::call_macro(const std::string& name, const std::vector<Parameter>& parameters, const NodeList& body,
                           Scope& closure, const Arguments& arguments) {
  if (arguments.positional.size() > parameters.size()) {
    throw EvaluationError(
        "macro '" + name + "' takes not more than " + std::to_string(parameters.size()) + " argument(s)",
        "pass at most " + std::to_string(parameters.size()) + " arguments");
  }
  const auto scope = std::make_shared<Scope>(closure.shared_from_this());
  std::vector<bool> given(parameters.size(), false);
  for (std::size_t i = 0; i < arguments.positional.size(); ++i) {
    scope->set(parameters[i].name, arguments.positional[i]);
    given[i] = true;
  }
  for (const auto& [keyword, value] : arguments.keyword) {
    std::size_t index = 0;
    while (index < parameters.size() && parameters[index].name != keyword) ++index;
    if (index == parameters.size() && keyword != "caller") {
      throw EvaluationError("macro '" + name + "' takes no keyword argument '" + keyword + "'",
                            "use one of the macro's parameter names");
    }
    if (index < parameters.size()) given[index] = true;
    scope->set(keyword, value);
  }
  for (std::size_t i = 0; i < parameters.size(); ++i) {
    if (given[i]) continue;
    scope->set(parameters[i].name, parameters[i].default_value
                                       ? evaluate(*parameters[i].default_value, *scope)
                                       : Value::undefined("parameter '" + parameters[i].name + "' was not provided"));
  }
  if (++call_depth_ > options_.max_call_depth) {
    --call_depth_;
    throw EvaluationError("macro calls nest more than " + std::to_string(options_.max_call_depth) + " deep",
                          "check the template for a macro that calls itself without end");
  }
  std::string text;
  try {
    text = render_to_string(body, scope);
  } catch (...) {
    --call_depth_;
    throw;
  }
  --call_depth_;
  return Value(std::move(text));
}

void Renderer::render_call_block(const Node& node, const std::shared_ptr<Scope>& scope) {
  const Value caller = make_macro("caller", node.parameters, node.body, scope);
  const Value result = evaluate_call(*node.expression, *scope, &caller);
  write(guarded(node.location, [&] { return to_str(result); }), node.location);
}

}  // namespace detail

std::string render_nodes(const NodeList& nodes, const Dict& variables, const TemplateOptions& options) {
  std::string output;
  const auto root = std::make_shared<detail::Scope>(nullptr);
  for (const auto& [name, value] : variables.entries()) root->set(name.as_string(), value);
  detail::Renderer renderer(options, output);
  renderer.render_nodes(nodes, root);
  return output;
}

}  // namespace graphed::jinja
