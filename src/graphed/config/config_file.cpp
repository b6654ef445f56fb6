// config/config_file.cpp — see config/config_file.h.
#include "graphed/config/config_file.h"

#include <cstring>

#include "graphed/util/error.h"
#include "graphed/util/file_system.h"

namespace graphed::config {

nlohmann::json read_config_file(const std::string& path) {
  std::string text;
  if (const int error = read_file(path, text)) {
    const std::string message = "cannot read --config file '" + path + "': " + std::strerror(error) +
                                "; fix: pass the path of an existing JSON file";
    throw ConfigError(message, {message});
  }
  nlohmann::json object;
  try {
    object = nlohmann::json::parse(text);
  } catch (const nlohmann::json::parse_error& error) {
    const std::string message = "--config file '" + path + "' is not valid JSON: " + error.what() +
                                "; fix: write a JSON object such as {\"num_layers\": 4}";
    throw ConfigError(message, {message});
  }
  if (!object.is_object()) {
    const std::string message = "--config file '" + path + "' must hold a JSON object of settings, got " +
                                std::string(object.type_name()) + "; fix: write {\"num_layers\": 4, ...}";
    throw ConfigError(message, {message});
  }
  return object;
}

}  // namespace graphed::config
