// config/config_file.h — reads a `--config file.json`: a JSON object of settings, keys as in
// Megatron (num_layers or num-layers), or a file graphed wrote itself: a checkpoint's trainer.json or
// `check-config --json` output, whose "config" object is taken. Errors name the file and the fix.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace graphed::config {

/// Reads and parses the file. Throws ConfigError when it cannot be read, is not valid JSON, or is
/// not a JSON object. Keys and values are checked later by apply_settings(). From trainer.json and
/// check-config output, the "config" object is returned without the derived values that
/// run_config_to_json adds (num_microbatches, moe_layers).
nlohmann::json read_config_file(const std::string& path);

}  // namespace graphed::config
