// serve/json_fields.cpp — see serve/json_fields.h.
#include "graphed/serve/json_fields.h"

#include "graphed/serve/api_error.h"
#include "graphed/util/text.h"

namespace graphed::serve {

using json = nlohmann::ordered_json;

std::string kind_of(const json& value) {
  switch (value.type()) {
    case json::value_t::null: return "null";
    case json::value_t::boolean: return "a boolean";
    case json::value_t::string: return "a string";
    case json::value_t::array: return value.empty() ? "an empty array" : "an array";
    case json::value_t::object: return "an object";
    case json::value_t::number_integer:
    case json::value_t::number_unsigned: return "an integer";
    case json::value_t::number_float: return "a number";
    default: return "something else";
  }
}

void wrong_type(const std::string& field, const json& value, const std::string& wanted) {
  throw invalid_request("'" + field + "' is " + kind_of(value) + "; send " + wanted, field);
}

const json* field_of(const json& body, const std::string& name) {
  const auto found = body.find(name);
  if (found == body.end() || found->is_null()) return nullptr;
  return &*found;
}

double number_in(const json& body, const std::string& name, double fallback, double low, double high) {
  const json* value = field_of(body, name);
  if (value == nullptr) return fallback;
  const std::string range = "a number from " + format_number(low) + " to " + format_number(high);
  if (!value->is_number()) wrong_type(name, *value, range);
  const double number = value->get<double>();
  if (!(number >= low && number <= high)) {
    throw invalid_request("'" + name + "' is " + format_number(number) + "; send " + range, name);
  }
  return number;
}

std::optional<int64_t> integer_in(const json& body, const std::string& name, int64_t low, int64_t high) {
  const json* value = field_of(body, name);
  if (value == nullptr) return std::nullopt;
  const std::string range = "an integer from " + std::to_string(low) + " to " + std::to_string(high);
  if (!value->is_number_integer()) wrong_type(name, *value, range);
  if (value->is_number_unsigned() && value->get<uint64_t>() > static_cast<uint64_t>(high)) {
    throw invalid_request("'" + name + "' is " + value->dump() + "; send " + range, name);
  }
  const int64_t number = value->get<int64_t>();
  if (number < low || number > high)
    throw invalid_request("'" + name + "' is " + std::to_string(number) + "; send " + range, name);
  return number;
}

bool boolean_in(const json& body, const std::string& name, bool fallback) {
  const json* value = field_of(body, name);
  if (value == nullptr) return fallback;
  if (!value->is_boolean()) wrong_type(name, *value, "true or false");
  return value->get<bool>();
}

}  // namespace graphed::serve
