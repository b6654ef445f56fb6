// serve/tool_call_grammar.h — the grammar of a chat reply that must call tools (tool_choice "required" or a named
// function): calls in the format the chat template teaches (serve/tool_calls.h: Hermes `<tool_call>\n{...}\n
// </tool_call>` blocks, or Llama 3.x's `{"name": ..., "parameters": ...}` joined by ';'), each
// {"name": one of the functions, "arguments" (Llama: "parameters"): a document of that function's parameters
// schema}. A reply drawn under it reads back through parse_tool_calls() into message.tool_calls, unless
// max_tokens cuts it first.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "graphed/serve/structured_output.h"
#include "graphed/serve/tool_calls.h"

namespace graphed::serve {

/// `tools`: the request's tools (an array); `functions`: the names a call may take (every tool's for "required", the
/// named one otherwise), each defined by `tools`; `several`: one call or more (parallel_tool_calls with
/// "required"), else exactly one. ApiError 400 when the format is kNone (nothing graphed can generate), or a
/// function's parameters are not an object schema or use what graphed cannot compile (param
/// tools[i].function.parameters, the message naming the keywords).
std::shared_ptr<CompiledGrammar> tool_call_grammar(const nlohmann::ordered_json& tools,
                                                   const std::vector<std::string>& functions, ToolCallFormat format,
                                                   bool several);

}  // namespace graphed::serve
