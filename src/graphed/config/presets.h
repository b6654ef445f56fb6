// config/presets.h — the named starting points of DESIGN.md §8 (tiny, small, gpt-125m, moe-small,
// llama-1b) as JSON objects of settings. `--preset NAME` applies one before --config and flags.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace graphed::config {

/// The preset names, in size order.
const std::vector<std::string>& preset_names();

/// The settings of a preset, or nullopt for an unknown name.
std::optional<nlohmann::json> preset_settings(const std::string& name);

/// One line describing a preset, for --help and docs.
std::string preset_summary(const std::string& name);

}  // namespace graphed::config
