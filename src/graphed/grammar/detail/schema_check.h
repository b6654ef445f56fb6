// grammar/detail/schema_check.h — check_schema(): walks a JSON schema before compilation and throws one
// SchemaError naming every unsupported keyword with its JSON pointer path, or the first invalid value.
// Internal to grammar/: json_schema.cpp calls it, then compiles knowing the schema is in the subset.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace graphed::grammar::detail {

/// Throws SchemaError if the schema (and every subschema) is not in json_schema.h's subset.
void check_schema(const nlohmann::ordered_json& schema);

/// A JSON pointer path for messages: "/" for the root, else "/properties/name" (with ~0 and ~1 escapes).
std::string display_path(const std::string& pointer);

/// "/a/b" + key, escaping '~' and '/' in the key as JSON pointers do.
std::string child_path(const std::string& pointer, const std::string& key);

}  // namespace graphed::grammar::detail
