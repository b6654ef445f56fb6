// tokenizer/detail/json_fields.h — reading tokenizer.json (and GPT-2 vocab files) with worded errors:
// every failure names the file, the field's path inside it ("model.merges[3]"), the value, and the
// fix, so no nlohmann message reaches the user. Internal to tokenizer/.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

namespace graphed::tokenizer::detail {

/// Where a JSON value sits: the file and the path of the field inside it.
struct JsonPlace {
  std::string file;
  std::string path;  ///< "" for the document itself, "pre_tokenizer.pretokenizers[1]"
  JsonPlace field(const std::string& key) const;
  JsonPlace item(std::size_t index) const;
  /// "'tokenizer.json' field model.merges[3]" (or "'tokenizer.json'" for the document).
  std::string describe() const;
};

/// Throws DataError "<place> <problem>; fix: <fix>" ("'t.json' field model.type is \"Unigram\", ...").
[[noreturn]] void fail_at(const JsonPlace& place, const std::string& problem, const std::string& fix);

/// A JSON value in a message: compact, cut to about 80 characters.
std::string json_excerpt(const nlohmann::json& value);

/// Reads a whole file. Throws DataError "cannot read tokenizer file '<path>': <reason>; fix: ...".
std::string read_text_file(const std::string& path);

/// Reads and parses a JSON file. Throws DataError naming the path (unreadable, or not JSON with
/// the parser's position).
nlohmann::json read_json_file(const std::string& path);

/// The field, which must exist (DataError otherwise).
const nlohmann::json& required_field(const nlohmann::json& object, const std::string& key, const JsonPlace& place);
/// The field as a string; DataError when missing or not a string.
std::string string_field(const nlohmann::json& object, const std::string& key, const JsonPlace& place);
/// The field as a string, nullopt when missing or null.
std::optional<std::string> optional_string_field(const nlohmann::json& object, const std::string& key,
                                                 const JsonPlace& place);
/// The field as a bool, `fallback` when missing or null.
bool bool_field(const nlohmann::json& object, const std::string& key, const JsonPlace& place, bool fallback);
/// The field as a non-negative integer; DataError when missing or not one.
int64_t index_field(const nlohmann::json& object, const std::string& key, const JsonPlace& place);
/// The value as a non-negative integer that fits an int32 token id.
int64_t token_id_value(const nlohmann::json& value, const JsonPlace& place);
/// The object's "type" string (DataError when missing: the fix names the accepted types).
std::string type_of(const nlohmann::json& object, const JsonPlace& place, const std::string& accepted);

}  // namespace graphed::tokenizer::detail
