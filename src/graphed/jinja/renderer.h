// jinja/renderer.h — render_nodes(): runs a parsed template with jinja2's scoping (for and macro bodies
// get their own scope, if does not; a namespace is shared), loop variables, macros, call blocks and the
// runaway limits of TemplateOptions. Internal to graphed_jinja; Template is the public entry.
#pragma once

#include <string>

#include "graphed/jinja/syntax_tree.h"
#include "graphed/jinja/template.h"

namespace graphed::jinja {

/// Renders `nodes` with `variables` (the render context with the globals under it). Throws
/// TemplateError naming the template position of the first failure.
std::string render_nodes(const NodeList& nodes, const Dict& variables, const TemplateOptions& options);

}  // namespace graphed::jinja
