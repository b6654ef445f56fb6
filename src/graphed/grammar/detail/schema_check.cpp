// grammar/detail/schema_check.cpp — the walk over a schema that collects unsupported keywords and invalid
// values, so one SchemaError lists them all.
#include "graphed/grammar/detail/schema_check.h"

#include <set>
#include <vector>

#include "graphed/grammar/detail/regex_syntax.h"
#include "graphed/grammar/detail/string_formats.h"
#include "graphed/grammar/json_schema.h"

namespace graphed::grammar::detail {

namespace {

using Json = nlohmann::ordered_json;

const std::set<std::string>& annotation_keywords() {
  static const std::set<std::string> keywords = {"title", "description", "default",    "examples", "$schema",
                                                 "$id",   "$comment",    "deprecated", "readOnly", "writeOnly"};
  return keywords;
}

const std::set<std::string>& type_names() {
  static const std::set<std::string> names = {"object", "array", "string", "number", "integer", "boolean", "null"};
  return names;
}

struct Findings {
  std::vector<std::string> unsupported;  // "'pattern' at /properties/name"
  std::vector<std::string> invalid;      // "'minItems' at /items must be a non-negative integer, got -1"
};

class SchemaChecker {
 public:
  explicit SchemaChecker(const Json& root) : root_(root) {}

  Findings run() {
    check(root_, "");
    return findings_;
  }

 private:
  void check(const Json& schema, const std::string& path);
  void check_keyword(const std::string& key, const Json& value, const std::string& path);
  void check_subschemas(const Json& value, const std::string& key, const std::string& path, bool as_array);
  void check_reference(const Json& value, const std::string& path);
  void check_count(const std::string& key, const Json& value, const std::string& path);
  void check_type(const Json& value, const std::string& path);
  void check_string_form(const Json& schema, const std::string& path);

  void invalid(const std::string& key, const std::string& path, const std::string& problem) {
    findings_.invalid.push_back("'" + key + "' at " + display_path(path) + " " + problem);
  }

  const Json& root_;
  Findings findings_;
};

void SchemaChecker::check(const Json& schema, const std::string& path) {
  if (schema.is_boolean()) {
    if (!schema.get<bool>())
      findings_.invalid.push_back("the schema false at " + display_path(path) + " matches nothing");
    return;
  }
  if (!schema.is_object()) {
    findings_.invalid.push_back("the schema at " + display_path(path) + " must be an object or a boolean, got " +
                                schema.dump());
    return;
  }
  // $ref, anyOf and oneOf stand alone: combining them with constraints would need an intersection.
  std::string combinator;
  for (const char* key : {"$ref", "anyOf", "oneOf"}) {
    if (!schema.contains(key)) continue;
    if (!combinator.empty())
      findings_.unsupported.push_back("'" + std::string(key) + "' beside '" + combinator + "' at " +
                                      display_path(path));
    if (combinator.empty()) combinator = key;
  }
  for (const auto& [key, value] : schema.items()) {
    if (annotation_keywords().count(key) > 0) continue;
    const bool standalone_part = key == combinator || key == "$defs" || key == "definitions" || key == "$ref" ||
                                 key == "anyOf" || key == "oneOf";
    if (!combinator.empty() && !standalone_part) {
      findings_.unsupported.push_back("'" + key + "' beside '" + combinator + "' at " + display_path(path));
      continue;
    }
    check_keyword(key, value, path);
  }
  if (schema.contains("minItems") && schema.contains("maxItems") && schema["minItems"].is_number_unsigned() &&
      schema["maxItems"].is_number_unsigned() &&
      schema["minItems"].get<std::uint64_t>() > schema["maxItems"].get<std::uint64_t>()) {
    invalid("minItems", path, "is larger than 'maxItems'");
  }
  if (schema.contains("minLength") && schema.contains("maxLength") && schema["minLength"].is_number_unsigned() &&
      schema["maxLength"].is_number_unsigned() &&
      schema["minLength"].get<std::uint64_t>() > schema["maxLength"].get<std::uint64_t>()) {
    invalid("minLength", path, "is larger than 'maxLength'");
  }
  check_string_form(schema, path);
}

// `pattern` and `format`: one of them per string, without length bounds (a grammar cannot intersect them).
void SchemaChecker::check_string_form(const Json& schema, const std::string& path) {
  const bool pattern = schema.contains("pattern");
  const bool format = schema.contains("format");
  if (!pattern && !format) return;
  const std::string name = pattern ? "pattern" : "format";
  if (pattern && format) findings_.unsupported.push_back("'pattern' beside 'format' at " + display_path(path));
  for (const char* constants : {"enum", "const"}) {  // compile_constants() would let every listed value through
    if (schema.contains(constants)) {
      findings_.unsupported.push_back("'" + name + "' beside '" + constants + "' at " + display_path(path) +
                                      " (list only the values that fit)");
    }
  }
  for (const char* bound : {"minLength", "maxLength"}) {
    if (schema.contains(bound)) {
      findings_.unsupported.push_back("'" + name + "' beside '" + bound + "' at " + display_path(path) +
                                      " (write the length into the pattern, e.g. {1,20})");
    }
  }
  if (pattern) {
    if (!schema["pattern"].is_string())
      return invalid("pattern", path, "must be a string, got " + schema["pattern"].dump());
    try {
      parse_regex(schema["pattern"].get<std::string>());
    } catch (const Error& error) {
      const std::string message = error.what();  // its own fix is the one check_schema() gives for all
      findings_.unsupported.push_back("'pattern' at " + display_path(path) + ": " +
                                      message.substr(0, message.find("; fix: ")));
    }
  }
  if (format) {
    if (!schema["format"].is_string())
      return invalid("format", path, "must be a string, got " + schema["format"].dump());
    if (format_pattern(schema["format"].get<std::string>()).empty()) {
      findings_.unsupported.push_back("'format' \"" + schema["format"].get<std::string>() + "\" at " +
                                      display_path(path) + " (graphed follows " + supported_formats() + ")");
    }
  }
}

void SchemaChecker::check_keyword(const std::string& key, const Json& value, const std::string& path) {
  if (key == "type") {
    check_type(value, path);
  } else if (key == "properties" || key == "$defs" || key == "definitions") {
    check_subschemas(value, key, path, false);
  } else if (key == "anyOf" || key == "oneOf" || key == "prefixItems") {
    check_subschemas(value, key, path, true);
  } else if (key == "items") {
    if (!value.is_boolean()) check(value, child_path(path, key));
  } else if (key == "additionalProperties") {
    if (!(value.is_boolean() && !value.get<bool>())) {
      findings_.unsupported.push_back("'additionalProperties' other than false at " + display_path(path));
    }
  } else if (key == "required") {
    bool names = value.is_array();
    for (const Json& name : value.is_array() ? value : Json::array()) names = names && name.is_string();
    if (!names) invalid(key, path, "must be an array of property names, got " + value.dump());
  } else if (key == "enum") {
    if (!value.is_array() || value.empty()) invalid(key, path, "must be a non-empty array, got " + value.dump());
  } else if (key == "minItems" || key == "maxItems" || key == "minLength" || key == "maxLength") {
    check_count(key, value, path);
  } else if (key == "$ref") {
    check_reference(value, path);
  } else if (key != "const" && key != "pattern" && key != "format") {  // pattern, format: check_string_form()
    findings_.unsupported.push_back("'" + key + "' at " + display_path(path));
  }
}

void SchemaChecker::check_subschemas(const Json& value, const std::string& key, const std::string& path,
                                     bool as_array) {
  const std::string inside = child_path(path, key);
  if (as_array) {
    if (!value.is_array() || value.empty())
      return invalid(key, path, "must be a non-empty array of schemas, got " + value.dump());
    for (std::size_t index = 0; index < value.size(); ++index)
      check(value[index], child_path(inside, std::to_string(index)));
    return;
  }
  if (!value.is_object()) return invalid(key, path, "must be an object of schemas, got " + value.dump());
  for (const auto& [name, schema] : value.items()) check(schema, child_path(inside, name));
}

void SchemaChecker::check_reference(const Json& value, const std::string& path) {
  if (!value.is_string()) return invalid("$ref", path, "must be a string, got " + value.dump());
  const std::string reference = value.get<std::string>();
  const bool local =
      reference == "#" || reference.rfind("#/$defs/", 0) == 0 || reference.rfind("#/definitions/", 0) == 0;
  if (!local) {
    findings_.unsupported.push_back("'$ref' to '" + reference + "' (only #, #/$defs/... and #/definitions/...) at " +
                                    display_path(path));
    return;
  }
  bool found = false;
  try {
    found = root_.contains(Json::json_pointer(reference.substr(1)));
  } catch (const nlohmann::json::exception&) {
    found = false;
  }
  if (!found) invalid("$ref", path, "points to '" + reference + "', which the schema does not define");
}

void SchemaChecker::check_count(const std::string& key, const Json& value, const std::string& path) {
  if (!value.is_number_unsigned() && !(value.is_number_integer() && value.get<std::int64_t>() >= 0)) {
    return invalid(key, path, "must be a non-negative integer, got " + value.dump());
  }
  if (value.get<std::uint64_t>() > 100000) invalid(key, path, "is over graphed's limit of 100000, got " + value.dump());
}

void SchemaChecker::check_type(const Json& value, const std::string& path) {
  const Json names = value.is_array() ? value : Json::array({value});
  bool known = !names.empty();
  for (const Json& name : names) known = known && name.is_string() && type_names().count(name.get<std::string>()) > 0;
  if (!known) {
    invalid(
        "type", path,
        "must be one of object, array, string, number, integer, boolean, null or a list of them, got " + value.dump());
  }
}

std::string join(const std::vector<std::string>& parts) {
  std::string text;
  for (const std::string& part : parts) text += (text.empty() ? "" : ", ") + part;
  return text;
}

}  // namespace

std::string display_path(const std::string& pointer) { return pointer.empty() ? "/" : pointer; }

std::string child_path(const std::string& pointer, const std::string& key) {
  std::string escaped;
  for (char character : key) {
    if (character == '~') {
      escaped += "~0";
    } else if (character == '/') {
      escaped += "~1";
    } else {
      escaped += character;
    }
  }
  return pointer + "/" + escaped;
}

void check_schema(const nlohmann::ordered_json& schema) {
  const Findings findings = SchemaChecker(schema).run();
  if (!findings.unsupported.empty()) {
    throw SchemaError("the schema uses keywords graphed does not support: " + join(findings.unsupported) +
                      "; fix: remove them (state such constraints in the prompt instead); docs/serving.md lists "
                      "what structured output supports");
  }
  if (!findings.invalid.empty()) {
    throw SchemaError("the JSON schema is not valid: " + join(findings.invalid) + "; fix: correct the schema");
  }
}

}  // namespace graphed::grammar::detail
