// grammar/json_schema.h — compile_json_schema(): a JSON schema (the supported subset below) to a Grammar
// whose sentences are exactly the documents valid for it in graphed's canonical compact form; any_json_object()
// for response_format json_object; compile_framed_json_schema() for documents between literal texts (tool calls);
// SchemaError. Torch-free; serve/ maps request fields to these calls.
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "graphed/grammar/grammar.h"
#include "graphed/util/error.h"

namespace graphed::grammar {

// Canonical form: no whitespace anywhere (`{"a":1,"b":[1,2]}`), so a model cannot loop on blanks; members
// in the order of `properties`.
//
// Supported keywords:
// - `type`: object, array, string, number, integer, boolean, null, or a list of them (any one);
// - objects: `properties`, `required` (each name must be in `properties`), `additionalProperties: false`.
//   Absent `additionalProperties` counts as false (strict mode: only the listed properties, never others);
//   `true` or a schema is refused. An object schema with neither `properties` nor `additionalProperties`
//   accepts any JSON object. Properties come in declared order, each optional one present or left out
//   (a grammar linear in the count of properties);
// - arrays: `items` (a schema, or false), `prefixItems`, `minItems`, `maxItems`. Without `items` and
//   `prefixItems` any items are allowed; with `prefixItems` and no `items` no items past the prefix are;
// - strings: `minLength`, `maxLength` (in code points); or `pattern` (grammar/regex.h's subset of ECMAScript,
//   searched as JSON schema says: an end not anchored by ^ or $ may have any characters beyond the match); or
//   `format` date-time, date, time, uuid, ipv4 or email (detail/string_formats.h). Characters are valid UTF-8 or
//   JSON escapes (a \u surrogate pair counts as one); raw control characters are refused;
// - numbers: JSON number syntax, bounded so every number fits a double: at most 20 digits before the point,
//   20 after it and 2 in the exponent; integers: an optional minus and at most 20 digits, no leading zeros;
// - `enum`, `const` (written as nlohmann-json dumps them, compact); beside `type`, enum values of other types
//   are dropped;
// - `anyOf`, `oneOf` (both as alternatives: oneOf's exclusivity is not enforced);
// - `$ref` to `#`, `#/$defs/...` or `#/definitions/...`, recursive too, as long as a cycle passes through an
//   object or array;
// - annotations, ignored: title, description, default, examples, $schema, $id, $comment, deprecated,
//   readOnly, writeOnly.
// Beside `$ref`, `anyOf` or `oneOf` only annotations and `$defs`/`definitions` may appear.
// Refused (SchemaError naming each keyword and its path): everything else, notably `pattern` or `format` beside
// each other or beside a length, other formats, `minimum`, `maximum`, `exclusiveMinimum`, `exclusiveMaximum`,
// `multipleOf` (the grammar could not guarantee them), `patternProperties`, `allOf`, `not`, `if`/`then`/`else`,
// `uniqueItems`, `contains`.

/// A schema that graphed cannot compile: unsupported keywords (all of them, with their JSON pointer paths)
/// or an invalid schema. what() ends with "; fix: ...".
class SchemaError : public Error {
 public:
  explicit SchemaError(const std::string& message) : Error(message) {}
};

/// Compiles a schema whose key order is kept (properties come in declared order). Throws SchemaError.
Grammar compile_json_schema(const nlohmann::ordered_json& schema);
/// As above; nlohmann::json keeps keys sorted, so properties come in alphabetical order.
Grammar compile_json_schema(const nlohmann::json& schema);
/// Parses the schema text keeping the declared order, then compiles it. Throws SchemaError for text that is
/// not JSON too.
Grammar compile_json_schema_text(std::string_view text);

/// How compile_framed_json_schema() writes its documents: each between the literal texts `before` and `after`,
/// `separator` between two, from `minimum` (at least 1) to `maximum` of them (maximum < 0: no bound). A model's
/// tool-call format, e.g. Hermes' before "<tool_call>\n", after "\n</tool_call>", separator "\n".
struct Framing {
  std::string before;
  std::string after;
  std::string separator;
  int minimum = 1;
  int maximum = 1;
};

/// As compile_json_schema(), with each document framed and repeated as `framing` says. Throws SchemaError.
Grammar compile_framed_json_schema(const nlohmann::ordered_json& schema, const Framing& framing);

/// A grammar of any JSON value whose top level is an object (response_format {"type": "json_object"}).
Grammar any_json_object();

}  // namespace graphed::grammar
