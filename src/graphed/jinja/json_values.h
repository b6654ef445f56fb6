// jinja/json_values.h — JSON in and out of the Jinja subset: a render context (nlohmann::ordered_json,
// key order kept) becomes Values, and dump_json is Python's json.dumps as transformers' `tojson` filter
// calls it (ensure_ascii=False by default, indent, separators, sort_keys).
#pragma once

#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "graphed/jinja/value.h"

namespace graphed::jinja {

/// JSON objects become dicts (same key order), arrays lists, integers ints (unsigned ones past int64
/// become floats), floats floats. Throws EvaluationError for binary values or nesting past
/// `max_depth` levels.
Value value_from_json(const nlohmann::ordered_json& json, int max_depth);

/// Options of json.dumps that the tojson filter passes on.
struct JsonDumpOptions {
  /// Indentation per level (json.dumps' indent as spaces or text); nullopt writes one line.
  std::optional<std::string> indent;
  /// Between items: ", " on one line, "," when indenting (json.dumps' defaults).
  std::string item_separator = ", ";
  /// Between a key and its value.
  std::string key_separator = ": ";
  /// Sort object keys.
  bool sort_keys = false;
  /// Escape every non-ASCII code point as \uXXXX (surrogate pairs past U+FFFF).
  bool ensure_ascii = false;
};

/// Python's json.dumps of a value. Throws EvaluationError "Object of type Undefined is not JSON
/// serializable" for undefined values, namespaces and callables.
std::string dump_json(const Value& value, const JsonDumpOptions& options);

}  // namespace graphed::jinja
