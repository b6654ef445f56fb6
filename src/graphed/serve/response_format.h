// serve/response_format.h — what a request's output must follow, read into one compiled grammar: OpenAI's
// response_format ({"type": "text"}, {"type": "json_object"}, {"type": "json_schema", "json_schema": {"name",
// "schema", "strict"}}: a document valid for the schema in grammar/json_schema.h's subset, `strict` always in
// effect), or vLLM's structured_outputs ({"json": schema}, {"regex": pattern}, {"choice": [texts]}, {"json_object":
// true}) and the older guided_json, guided_regex and guided_choice. One of them per request; vLLM's grammar,
// structural_tag and whitespace_pattern are refused by name rather than ignored.
#pragma once

#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "graphed/serve/structured_output.h"

namespace graphed::serve {

/// What the output must follow and the field that asked for it.
struct OutputFormat {
  std::shared_ptr<CompiledGrammar> grammar;  ///< null for free text
  std::string field;                         ///< "response_format", "structured_outputs", "guided_json", ...
};

/// ApiError 400 naming the field at fault; a schema or pattern graphed cannot follow names every construct it
/// cannot, with the field's name as param; two fields that both constrain the output are refused.
OutputFormat read_response_format(const nlohmann::ordered_json& body);

}  // namespace graphed::serve
