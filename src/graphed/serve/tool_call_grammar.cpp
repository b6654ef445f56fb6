// serve/tool_call_grammar.cpp — see serve/tool_call_grammar.h. The calls' schema is one anyOf over the functions,
// each function's parameters placed under $defs with its local $refs moved there, so that one schema (and one
// grammar) holds them all; each function's schema is first compiled alone, so that a refusal names its own paths.
#include "graphed/serve/tool_call_grammar.h"

#include "graphed/grammar/json_schema.h"
#include "graphed/serve/api_error.h"

namespace graphed::serve {
namespace {

using json = nlohmann::ordered_json;

/// The tool (in `tools`) whose function has this name, and its index; nullptr when none has.
const json* tool_named(const json& tools, const std::string& name, std::size_t& index) {
  for (index = 0; index < tools.size(); ++index) {
    const json& tool = tools[index];
    if (!tool.is_object() || !tool.contains("function") || !tool["function"].is_object()) continue;
    const json& function = tool["function"];
    if (function.contains("name") && function["name"] == name) return &tool;
  }
  return nullptr;
}

/// A function's parameters schema: absent or {} is an empty parameter list (OpenAI's reading); a schema without a
/// type is taken as an object's. ApiError 400 for anything that is not an object schema.
json parameters_of(const json& function, const std::string& param) {
  const auto found = function.find("parameters");
  if (found == function.end() || found->is_null() || (found->is_object() && found->empty())) {
    return json{{"type", "object"}, {"properties", json::object()}};
  }
  const std::string wanted = "; send an object schema ({\"type\": \"object\", \"properties\": {...}})";
  if (!found->is_object()) throw invalid_request("'" + param + "' is not a JSON schema object" + wanted, param);
  json schema = *found;
  const bool combined = schema.contains("$ref") || schema.contains("anyOf") || schema.contains("oneOf");
  if (!schema.contains("type") && !combined) schema["type"] = "object";
  if (schema.contains("type") && schema["type"] != "object") {
    throw invalid_request(
        "'" + param + "' has type " + schema["type"].dump() + "; a function's arguments are an object" + wanted, param);
  }
  return schema;
}

json rebased(const json& schema, const std::string& base);

json rebased_each(const json& schemas, const std::string& base, bool named) {
  json out = schemas;
  if (named && schemas.is_object()) {
    for (auto& [name, schema] : out.items()) schema = rebased(schema, base);
  } else if (!named && schemas.is_array()) {
    for (auto& schema : out) schema = rebased(schema, base);
  }
  return out;
}

/// The schema with its local $refs ("#/$defs/x", "#") moved under `base` ("#/$defs/tool0"), where it will sit in
/// the calls' schema. Only the keywords that hold schemas are entered (the values of enum, const, default and the
/// like are data); keywords graphed refuses were refused before (the schema compiled alone).
json rebased(const json& schema, const std::string& base) {
  if (!schema.is_object()) return schema;
  json out = schema;
  for (auto& [key, value] : out.items()) {
    if (key == "$ref" && value.is_string() && value.get<std::string>().rfind('#', 0) == 0) {
      value = base + value.get<std::string>().substr(1);
    } else if (key == "properties" || key == "$defs" || key == "definitions") {
      value = rebased_each(value, base, true);
    } else if (key == "anyOf" || key == "oneOf" || key == "prefixItems") {
      value = rebased_each(value, base, false);
    } else if (key == "items") {
      value = rebased(value, base);
    }
  }
  return out;
}

/// One function's call: {"name": its name, `arguments_key`: a $ref to its parameters at `reference`}.
json call_schema(const std::string& name, const std::string& arguments_key, const std::string& reference) {
  json properties = json::object();
  properties["name"] = {{"const", name}};
  properties[arguments_key] = {{"$ref", reference}};
  return {{"type", "object"}, {"properties", properties}, {"required", json::array({"name", arguments_key})}};
}

grammar::Framing framing_of(ToolCallFormat format, bool several) {
  grammar::Framing framing;
  if (format == ToolCallFormat::kHermes) framing = {"<tool_call>\n", "\n</tool_call>", "\n", 1, 1};
  if (format == ToolCallFormat::kLlamaJson) framing = {"", "", ";", 1, 1};
  framing.maximum = several ? -1 : 1;
  return framing;
}

}  // namespace

std::shared_ptr<CompiledGrammar> tool_call_grammar(const json& tools, const std::vector<std::string>& functions,
                                                   ToolCallFormat format, bool several) {
  if (format == ToolCallFormat::kNone) {
    throw invalid_request(
        "'tool_choice' asks for a call, but the model's chat template teaches no tool-call format graphed writes "
        "(Hermes <tool_call> blocks or Llama 3.x JSON calls); send tool_choice \"auto\" or \"none\"",
        "tool_choice");
  }
  const std::string arguments_key = format == ToolCallFormat::kLlamaJson ? "parameters" : "arguments";
  json calls = json::array();
  json definitions = json::object();
  for (const std::string& name : functions) {
    std::size_t index = 0;
    const json* tool = tool_named(tools, name, index);
    if (tool == nullptr) throw invalid_request("'tool_choice' names '" + name + "', which no tool defines", "tools");
    const std::string param = "tools[" + std::to_string(index) + "].function.parameters";
    const json parameters = parameters_of((*tool)["function"], param);
    try {
      grammar::compile_json_schema(parameters);
    } catch (const grammar::SchemaError& error) {
      throw invalid_request("'" + param + "' (function '" + name + "'), which a call must follow: " + error.what(),
                            param);
    }
    const std::string definition = "tool" + std::to_string(calls.size());
    definitions[definition] = rebased(parameters, "#/$defs/" + definition);
    calls.push_back(call_schema(name, arguments_key, "#/$defs/" + definition));
  }
  const json schema{{"anyOf", calls}, {"$defs", definitions}};
  const std::string key =
      "tool_calls " + std::to_string(static_cast<int>(format)) + (several ? " several " : " one ") + schema.dump();
  return shared_compiled_grammar(
      key, "tool_calls", [&] { return grammar::compile_framed_json_schema(schema, framing_of(format, several)); });
}

}  // namespace graphed::serve
