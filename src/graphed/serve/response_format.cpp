// serve/response_format.cpp — see serve/response_format.h. The grammar is compiled while the request is read, so a
// schema or pattern graphed cannot follow is a 400 before anything is queued; its n choices then share the one
// grammar, and requests that send the same share it too (shared_compiled_grammar).
#include "graphed/serve/response_format.h"

#include <string>
#include <vector>

#include "graphed/grammar/json_schema.h"
#include "graphed/grammar/regex.h"
#include "graphed/serve/api_error.h"
#include "graphed/serve/json_fields.h"

namespace graphed::serve {
namespace {

using json = nlohmann::ordered_json;

/// A schema given as an object, or as JSON text (vLLM takes both), compiled under `param`'s name.
std::shared_ptr<CompiledGrammar> schema_grammar(const json& given, const std::string& param) {
  json schema = given;
  if (given.is_string()) {
    try {
      schema = json::parse(given.get<std::string>());
    } catch (const json::parse_error&) {
      throw invalid_request("'" + param + "' is a string that is not JSON; send the JSON schema as an object", param);
    }
  }
  if (!schema.is_object() && !schema.is_boolean()) {
    if (given.is_string()) {
      throw invalid_request(
          "'" + param + "' is JSON text holding " + kind_of(schema) + "; send a JSON schema (an object)", param);
    }
    wrong_type(param, given, "a JSON schema (an object)");
  }
  try {
    return shared_compiled_grammar("json_schema " + schema.dump(), "json_schema",
                                   [&] { return grammar::compile_json_schema(schema); });
  } catch (const grammar::SchemaError& error) {
    throw invalid_request("'" + param + "': " + error.what(), param);
  }
}

std::shared_ptr<CompiledGrammar> regex_grammar(const json& pattern, const std::string& param) {
  if (!pattern.is_string()) wrong_type(param, pattern, "a regular expression as a string");
  const std::string text = pattern.get<std::string>();
  try {
    return shared_compiled_grammar("regex " + text, "regex", [&] { return grammar::compile_regex(text); });
  } catch (const grammar::RegexError& error) {
    throw invalid_request("'" + param + "': " + error.what(), param);
  }
}

std::shared_ptr<CompiledGrammar> choice_grammar(const json& choices, const std::string& param) {
  const std::string wanted = "a non-empty array of the texts the output may be";
  if (!choices.is_array() || choices.empty()) wrong_type(param, choices, wanted);
  std::vector<std::string> texts;
  for (const json& choice : choices) {
    if (!choice.is_string()) wrong_type(param, choices, wanted + " (strings)");
    texts.push_back(choice.get<std::string>());
  }
  return shared_compiled_grammar("choice " + choices.dump(), "choice", [&] { return grammar::compile_choice(texts); });
}

std::shared_ptr<CompiledGrammar> json_object_grammar() {
  return shared_compiled_grammar("json_object", "json_object", grammar::any_json_object);
}

std::shared_ptr<CompiledGrammar> json_schema_format(const json& format) {
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
  const std::string param = "response_format.json_schema.schema";
  const json* schema = field_of(*wrapper, "schema");
  if (schema == nullptr) {
    throw invalid_request("'" + param + "' is missing; send the JSON schema the reply must follow", param);
  }
  if (schema->is_string()) wrong_type(param, *schema, "a JSON schema (an object)");
  return schema_grammar(*schema, param);
}

std::shared_ptr<CompiledGrammar> openai_response_format(const json& format) {
  const std::string wanted =
      "{\"type\": \"text\"}, {\"type\": \"json_object\"} or {\"type\": \"json_schema\", \"json_schema\": {...}}";
  if (!format.is_object()) wrong_type("response_format", format, wanted);
  const json* type = field_of(format, "type");
  if (type == nullptr || !type->is_string()) {
    throw invalid_request(
        "'response_format.type' is " + (type == nullptr ? std::string("missing") : kind_of(*type)) + "; send " + wanted,
        "response_format");
  }
  const std::string name = type->get<std::string>();
  if (name == "text") return nullptr;
  if (name == "json_object") return json_object_grammar();
  if (name == "json_schema") return json_schema_format(format);
  throw invalid_request("'response_format.type' is \"" + name + "\"; send " + wanted, "response_format");
}

const char* kStructuredWanted = "one of json (a schema), regex, choice or json_object";

/// vLLM's structured_outputs: exactly one of its forms.
std::shared_ptr<CompiledGrammar> structured_outputs(const json& options) {
  if (!options.is_object())
    wrong_type("structured_outputs", options, std::string("an object with ") + kStructuredWanted);
  for (const char* unsupported : {"grammar", "structural_tag", "whitespace_pattern"}) {
    if (field_of(options, unsupported) == nullptr) continue;
    const std::string param = std::string("structured_outputs.") + unsupported;
    throw invalid_request("'" + param + "' is not supported; send " + kStructuredWanted + " instead", param);
  }
  std::vector<std::string> given;
  for (const auto& [key, value] : options.items()) {
    if (value.is_null()) continue;  // clients that write every field send the unused ones as null
    // vLLM's switches of its backends: graphed has one, which never falls back, writes no whitespace and allows no
    // property a schema does not list; read for their type.
    if (key == "disable_fallback" || key == "disable_any_whitespace" || key == "disable_additional_properties") {
      if (!value.is_boolean()) wrong_type("structured_outputs." + key, value, "true or false");
      continue;
    }
    const bool known = key == "json" || key == "regex" || key == "choice" || key == "json_object";
    if (!known) {
      throw invalid_request("'structured_outputs." + key + "' is not a field graphed knows; send " + kStructuredWanted,
                            "structured_outputs." + key);
    }
    if (!(key == "json_object" && value.is_boolean() && !value.get<bool>())) given.push_back(key);
  }
  if (given.size() != 1) {
    throw invalid_request(
        "'structured_outputs' gives " + std::to_string(given.size()) + " forms; send exactly " + kStructuredWanted,
        "structured_outputs");
  }
  const std::string param = "structured_outputs." + given.front();
  const json& value = options[given.front()];
  if (given.front() == "json") return schema_grammar(value, param);
  if (given.front() == "regex") return regex_grammar(value, param);
  if (given.front() == "choice") return choice_grammar(value, param);
  if (!value.is_boolean()) wrong_type(param, value, "true");
  return json_object_grammar();
}

/// A field that asks for structured output, read into its grammar.
struct Asked {
  std::string field;
  std::shared_ptr<CompiledGrammar> grammar;
};

std::vector<Asked> read_each_form(const json& body) {
  for (const char* unsupported : {"guided_grammar", "guided_whitespace_pattern"}) {
    if (field_of(body, unsupported) == nullptr) continue;
    throw invalid_request(std::string("'") + unsupported +
                              "' (vLLM's structured output) is not supported; send response_format, or "
                              "structured_outputs with json, regex or choice, instead",
                          unsupported);
  }
  if (const json* backend = field_of(body, "guided_decoding_backend"); backend != nullptr && !backend->is_string()) {
    wrong_type("guided_decoding_backend", *backend, "a backend's name (graphed has one and reads none)");
  }
  std::vector<Asked> asked;
  if (const json* format = field_of(body, "response_format"); format != nullptr) {
    if (auto grammar = openai_response_format(*format)) asked.push_back({"response_format", grammar});
  }
  if (const json* options = field_of(body, "structured_outputs"); options != nullptr) {
    asked.push_back({"structured_outputs", structured_outputs(*options)});
  }
  if (const json* schema = field_of(body, "guided_json"); schema != nullptr) {
    asked.push_back({"guided_json", schema_grammar(*schema, "guided_json")});
  }
  if (const json* pattern = field_of(body, "guided_regex"); pattern != nullptr) {
    asked.push_back({"guided_regex", regex_grammar(*pattern, "guided_regex")});
  }
  if (const json* choices = field_of(body, "guided_choice"); choices != nullptr) {
    asked.push_back({"guided_choice", choice_grammar(*choices, "guided_choice")});
  }
  return asked;
}

}  // namespace

OutputFormat read_response_format(const json& body) {
  const std::vector<Asked> asked = read_each_form(body);
  if (asked.empty()) return {};
  if (asked.size() > 1) {
    throw invalid_request(
        "'" + asked[0].field + "' and '" + asked[1].field + "' both constrain the output; send one of them",
        asked[1].field);
  }
  return {asked.front().grammar, asked.front().field};
}

}  // namespace graphed::serve
