// config/presets.h — the named starting points of DESIGN.md §8 (tiny, small, gpt-125m, moe-small,
// llama-1b) as JSON objects of settings. `--preset NAME` applies one before --config and flags.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "graphed/config/settings.h"

namespace graphed::config {

/// The preset names, in size order.
const std::vector<std::string>& preset_names();

/// The settings of a preset, or nullopt for an unknown name.
std::optional<nlohmann::json> preset_settings(const std::string& name);

/// One line describing a preset, for --help and docs.
std::string preset_summary(const std::string& name);

/// A warmup that came from a preset and is longer than the decay of this run (--lr-decay-iters,
/// unset = --train-iters) is cut to a tenth of the decay, so `--preset tiny --train-iters 5` runs.
/// Returns the note saying so, or nullopt when nothing changed (a warmup the user gave is left to
/// rule TR-4).
/// The origin of the warmup becomes "preset NAME, fitted to the run".
std::optional<std::string> fit_preset_warmup(Settings& settings, SettingOrigins& origins);

}  // namespace graphed::config
