// serve/response_format.cpp — see serve/response_format.h. The schema is compiled while the request is read, so a
// schema graphed cannot follow is a 400 before anything is queued; its n choices then share the one grammar.
#include "graphed/serve/response_format.h"

#include "graphed/grammar/json_schema.h"
#include "graphed/serve/api_error.h"
#include "graphed/serve/json_fields.h"

namespace graphed::serve {
namespace {

using json = nlohmann::ordered_json;

constexpr const char* kSchemaParam = "response_format.json_schema.schema";

/// vLLM's extra forms of structured output, which graphed does not read: refused, so that a client that sends one
/// does not get unconstrained text believing it constrained.
void refuse_guided_fields(const json& body) {
  for (const char* name : {"guided_json", "guided_choice", "guided_regex", "guided_grammar", "guided_decoding_backend",
                           "structured_outputs"}) {
    if (field_of(body, name) == nullptr) continue;
    throw invalid_request(std::string("'") + name +
                              "' (vLLM's structured output) is not supported; send response_format "
                              "{\"type\": \"json_schema\", \"json_schema\": {\"name\": ..., \"schema\": ...}} instead",
                          name);
  }
}

std::shared_ptr<CompiledGrammar> json_schema_grammar(const json& format) {
  const json* wrapper = field_of(format, "json_schema");
  const std::string wanted = "an object {\"name\": ..., \"schema\": {...}, \"strict\": true}";
  if (wrapper == nullptr) {
    throw invalid_request("'response_format.json_schema' is missing; send " + wanted, "response_format.json_schema");
  }
  if (!wrapper->is_object()) wrong_type("response_format.json_schema", *wrapper, wanted);
  if (const json* name = field_of(*wrapper, "name"); name != nullptr && !name->is_string()) {
    wrong_type("response_format.json_schema.name", *name, "the schema's name as a string");
  }
  boolean_in(*wrapper, "strict", true);  // checked for its type; graphed always follows the schema strictly
  const json* schema = field_of(*wrapper, "schema");
  if (schema == nullptr) {
    throw invalid_request("'" + std::string(kSchemaParam) + "' is missing; send the JSON schema the reply must follow",
                          kSchemaParam);
  }
  if (!schema->is_object() && !schema->is_boolean()) wrong_type(kSchemaParam, *schema, "a JSON schema (an object)");
  try {
    return shared_compiled_grammar("json_schema " + schema->dump(), "json_schema",
                                   [&] { return grammar::compile_json_schema(*schema); });
  } catch (const grammar::SchemaError& error) {
    throw invalid_request(std::string("'") + kSchemaParam + "': " + error.what(), kSchemaParam);
  }
}

}  // namespace

std::shared_ptr<CompiledGrammar> read_response_format(const json& body) {
  refuse_guided_fields(body);
  const json* format = field_of(body, "response_format");
  if (format == nullptr) return nullptr;
  const std::string wanted =
      "{\"type\": \"text\"}, {\"type\": \"json_object\"} or {\"type\": \"json_schema\", \"json_schema\": {...}}";
  if (!format->is_object()) wrong_type("response_format", *format, wanted);
  const json* type = field_of(*format, "type");
  if (type == nullptr || !type->is_string()) {
    throw invalid_request(
        "'response_format.type' is " + (type == nullptr ? std::string("missing") : kind_of(*type)) + "; send " + wanted,
        "response_format");
  }
  const std::string name = type->get<std::string>();
  if (name == "text") return nullptr;
  if (name == "json_object") return shared_compiled_grammar("json_object", "json_object", grammar::any_json_object);
  if (name == "json_schema") return json_schema_grammar(*format);
  throw invalid_request("'response_format.type' is \"" + name + "\"; send " + wanted, "response_format");
}

}  // namespace graphed::serve
