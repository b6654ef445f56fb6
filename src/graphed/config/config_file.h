// config/config_file.h — reads a `--config file.json`: a JSON object of settings, keys as in
// Megatron (num_layers or num-layers). Errors name the file and say what to do.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace graphed::config {

/// Reads and parses the file. Throws ConfigError when it cannot be read, is not valid JSON, or is
/// not a JSON object. Keys and values are checked later by apply_settings().
nlohmann::json read_config_file(const std::string& path);

}  // namespace graphed::config
