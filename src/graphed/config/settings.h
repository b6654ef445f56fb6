// config/settings.h — everything a user can set, as one table. Each entry names a setting by its
// Megatron key (num_layers; flag --num-layers, also --num_layers), its kind, help text and where it
// lives in Settings. The CLI, JSON config files, presets, check-config's echo and the docs all go
// through this table, so a setting is declared exactly once. No argv or environment here.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "graphed/config/cuda_graph_config.h"
#include "graphed/config/model_config.h"
#include "graphed/config/train_config.h"

namespace graphed::config {

/// What the user gave, before migration and derivation: the three sections every setting lives in.
struct Settings {
  ModelConfig model;
  TrainConfig train;
  CudaGraphInputs cuda_graph;
};

enum class SettingKind { kInt, kFloat, kBool, kString, kChoice, kList, kChoiceList };

/// One settable value.
struct SettingSpec {
  std::string key;  ///< Megatron's argument name, e.g. "num_layers"
  SettingKind kind = SettingKind::kString;
  std::string section;               ///< "model", "train" or "cuda_graph"
  std::string help;                  ///< one line
  std::vector<std::string> choices;  ///< valid values of kChoice / kChoiceList
  bool optional = false;             ///< may be unset (JSON null); unset has a documented meaning
  bool deprecated = false;           ///< accepted and migrated, hidden from --help
  /// Turns a JSON value of another type into this setting's kind before the check, or is empty
  /// (moe_layer_freq takes an integer or a 0/1 list, as Megatron's field does).
  std::function<nlohmann::json(const nlohmann::json&)> convert;
  std::function<void(Settings&, const nlohmann::json&)> assign;  ///< value already checked
  std::function<nlohmann::json(const Settings&)> read;

  /// "--num-layers"
  std::string flag() const;
  /// "--num_layers"
  std::string underscore_flag() const;
};

/// A flag that sets a fixed value of another setting (Megatron's --disable-bias-linear).
struct SettingAlias {
  std::string flag;  ///< e.g. "--disable-bias-linear"
  std::string key;   ///< e.g. "add_bias_linear"
  nlohmann::json value;
  std::string help;
};

/// Where each setting's value came from: "default", "preset tiny", "--config run.json", "command line".
using SettingOrigins = std::map<std::string, std::string>;

/// Every setting, grouped by section, in --help order.
const std::vector<SettingSpec>& setting_specs();
/// Every alias flag.
const std::vector<SettingAlias>& setting_aliases();
/// Finds a setting by key ("num_layers"), dash form ("num-layers") or flag ("--num-layers").
const SettingSpec* find_setting(const std::string& name);
/// Every key, for "did you mean" suggestions.
std::vector<std::string> setting_keys();

/// Converts command-line tokens to a checked value. label is how the user spelled the flag.
/// Throws ConfigError: "--num-layers expects an integer, got 'abc'".
nlohmann::json parse_setting_tokens(const SettingSpec& spec, const std::vector<std::string>& tokens,
                                    const std::string& label);
/// Type-checks a JSON value (from a config file or preset). label names the key and its source.
/// Throws ConfigError: "num_layers in --config run.json expects an integer, got \"4\"".
nlohmann::json check_setting_value(const SettingSpec& spec, const nlohmann::json& value, const std::string& label);

/// Applies a JSON object of settings (keys in underscore or dash form) from the named source
/// ("preset tiny", "--config run.json"). Throws ConfigError listing every unknown key (with the
/// nearest valid one) and every bad value; nothing is applied then. Records origins if given.
void apply_settings(Settings& settings, const nlohmann::json& object, const std::string& source,
                    SettingOrigins* origins = nullptr);

/// How a setting's value reads in --help, notes and check-config: null as "unset", a float the shortest
/// way that reads back (0.001), a string as it is, a list's items joined by separator (empty_list when
/// there are none), anything else as JSON (true, 4).
std::string setting_value_text(const nlohmann::json& value, const std::string& separator = ",",
                               const std::string& empty_list = "empty");

/// The settings as a JSON object of key -> value (null = unset), in table order.
nlohmann::json settings_to_json(const Settings& settings);

}  // namespace graphed::config
