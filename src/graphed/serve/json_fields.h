// serve/json_fields.h — the small readers every request field goes through: a field looked up (absent and null
// alike mean "not given", as OpenAI's clients send null), its type and range checked, and on a mistake an ApiError
// 400 that names the field, says what came, and what to send instead. Which fields a request has is not here
// (serve/openai_protocol.h, serve/sampling_fields.h, serve/response_format.h).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

namespace graphed::serve {

/// What a JSON value is, in words: "a string", "an empty array", "an integer", ...
std::string kind_of(const nlohmann::ordered_json& value);

/// Throws ApiError 400: "'field' is <kind>; send <wanted>".
[[noreturn]] void wrong_type(const std::string& field, const nlohmann::ordered_json& value, const std::string& wanted);

/// The field, or nullptr when it is absent or null.
const nlohmann::ordered_json* field_of(const nlohmann::ordered_json& body, const std::string& name);

/// A number from `low` to `high` (both included), or `fallback` when not given. `name` is also the param of an error.
double number_in(const nlohmann::ordered_json& body, const std::string& name, double fallback, double low, double high);
/// An integer from `low` to `high` (both included), or nullopt when not given.
std::optional<int64_t> integer_in(const nlohmann::ordered_json& body, const std::string& name, int64_t low,
                                  int64_t high);
/// true or false, or `fallback` when not given.
bool boolean_in(const nlohmann::ordered_json& body, const std::string& name, bool fallback);

}  // namespace graphed::serve
