// serve/response_format.h — OpenAI's response_format read into the grammar a request's output must follow:
// {"type": "text"} (none), {"type": "json_object"} (any JSON object), {"type": "json_schema", "json_schema": {"name",
// "schema", "strict"}} (a document valid for the schema, in grammar/json_schema.h's subset; `strict` is always in
// effect). vLLM's other forms (guided_json, guided_choice, guided_regex, guided_grammar, structured_outputs) are
// refused by name rather than ignored.
#pragma once

#include <memory>

#include <nlohmann/json.hpp>

#include "graphed/serve/structured_output.h"

namespace graphed::serve {

/// The compiled grammar, or null for text. ApiError 400 naming the field at fault; a schema graphed cannot compile
/// names every unsupported keyword, with param response_format.json_schema.schema.
std::shared_ptr<CompiledGrammar> read_response_format(const nlohmann::ordered_json& body);

}  // namespace graphed::serve
