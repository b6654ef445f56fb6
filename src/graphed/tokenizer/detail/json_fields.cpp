// tokenizer/detail/json_fields.cpp — see tokenizer/detail/json_fields.h.
#include "graphed/tokenizer/detail/json_fields.h"

#include <cctype>
#include <cstring>
#include <limits>

#include "graphed/util/error.h"
#include "graphed/util/file_system.h"
#include "graphed/util/text.h"
#include "graphed/util/utf8.h"

namespace graphed::tokenizer::detail {

using nlohmann::json;

JsonPlace JsonPlace::field(const std::string& key) const { return {file, path.empty() ? key : path + "." + key}; }

JsonPlace JsonPlace::item(std::size_t index) const { return {file, path + "[" + std::to_string(index) + "]"}; }

std::string JsonPlace::describe() const {
  if (path.empty()) return "'" + file + "'";
  return "'" + file + "' field " + path;
}

void fail_at(const JsonPlace& place, const std::string& problem, const std::string& fix) {
  throw DataError(place.describe() + " " + problem + "; fix: " + fix);
}

std::string json_excerpt(const json& value) {
  constexpr std::size_t kMaxCharacters = 80;
  std::string text = value.dump(-1, ' ', false, json::error_handler_t::replace);
  if (text.size() > kMaxCharacters) text = to_valid_utf8_lossy(text.substr(0, kMaxCharacters)) + "...";
  return text;
}

std::string read_text_file(const std::string& path) {
  std::string text;
  if (const int error = read_file(path, text)) {
    std::string reason = std::strerror(error);
    reason[0] = static_cast<char>(std::tolower(static_cast<unsigned char>(reason[0])));
    throw DataError("cannot read tokenizer file '" + path + "': " + reason +
                    "; fix: check the path and its permissions");
  }
  return text;
}

json read_json_file(const std::string& path) {
  const std::string text = read_text_file(path);
  try {
    return json::parse(text);
  } catch (const json::exception& error) {
    throw DataError("tokenizer file '" + path + "' is not valid JSON (" + without_library_tag(error.what()) +
                    "); fix: pass an intact tokenizer.json (or vocab.json) file");
  }
}

const json& required_field(const json& object, const std::string& key, const JsonPlace& place) {
  if (!object.is_object()) fail_at(place, "must be a JSON object, got " + json_excerpt(object), "repair the file");
  const auto found = object.find(key);
  if (found == object.end()) fail_at(place.field(key), "is missing", "add the field (see docs/tokenizers.md)");
  return *found;
}

std::string string_field(const json& object, const std::string& key, const JsonPlace& place) {
  const json& value = required_field(object, key, place);
  if (!value.is_string()) fail_at(place.field(key), "must be a string, got " + json_excerpt(value), "repair the file");
  return value.get<std::string>();
}

std::optional<std::string> optional_string_field(const json& object, const std::string& key, const JsonPlace& place) {
  if (!object.is_object()) return std::nullopt;
  const auto found = object.find(key);
  if (found == object.end() || found->is_null()) return std::nullopt;
  if (!found->is_string())
    fail_at(place.field(key), "must be a string or null, got " + json_excerpt(*found), "repair the file");
  return found->get<std::string>();
}

bool bool_field(const json& object, const std::string& key, const JsonPlace& place, bool fallback) {
  if (!object.is_object()) return fallback;
  const auto found = object.find(key);
  if (found == object.end() || found->is_null()) return fallback;
  if (!found->is_boolean())
    fail_at(place.field(key), "must be true or false, got " + json_excerpt(*found), "repair the file");
  return found->get<bool>();
}

int64_t token_id_value(const json& value, const JsonPlace& place) {
  if (!value.is_number_integer() || value.get<int64_t>() < 0 ||
      value.get<int64_t>() > std::numeric_limits<int32_t>::max()) {
    fail_at(place, "must be a token id (an integer from 0 to 2147483647), got " + json_excerpt(value),
            "repair the file");
  }
  return value.get<int64_t>();
}

int64_t index_field(const json& object, const std::string& key, const JsonPlace& place) {
  return token_id_value(required_field(object, key, place), place.field(key));
}

std::string type_of(const json& object, const JsonPlace& place, const std::string& accepted) {
  if (!object.is_object())
    fail_at(place, "must be an object with a \"type\", got " + json_excerpt(object), "use one of " + accepted);
  const auto found = object.find("type");
  if (found == object.end() || !found->is_string()) {
    fail_at(place.field("type"), "is missing or not a string", "use one of " + accepted);
  }
  return found->get<std::string>();
}

}  // namespace graphed::tokenizer::detail
