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

/// The settings a saved run's resolved configuration (trainer.json's or check-config's "config")
/// gives another run: without the run's own outputs and inputs (load, save, save_interval,
/// metrics_file, device: a new run writing into the old one's folder would replace its checkpoints),
/// without values only derived for it (num_microbatches, moe_layers; global_batch_size equal to the
/// micro batch, lr_decay_iters equal to train_iters), so a longer run derives them again.
nlohmann::json saved_run_settings(const nlohmann::json& resolved);

/// Whether a setting belongs to the launch rather than to what the run computes, so that a saved
/// configuration does not carry it: the run's own paths and device (load, save, save_interval,
/// metrics_file, device) and its parallel layout (a checkpoint loads under another one).
bool is_launch_setting(const std::string& key);

}  // namespace graphed::config
