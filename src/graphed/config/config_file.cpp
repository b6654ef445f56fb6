// config/config_file.cpp — see config/config_file.h.
#include "graphed/config/config_file.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "graphed/util/error.h"
#include "graphed/util/file_system.h"
#include "graphed/util/text.h"

namespace graphed::config {
namespace {

/// trainer.json has {"iteration", "config"}; check-config --json has {"valid", "config", ...}.
bool is_saved_configuration(const nlohmann::json& object) {
  return object.contains("config") && object["config"].is_object() &&
         (object.contains("iteration") || object.contains("valid"));
}

}  // namespace

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
  } catch (const nlohmann::json::exception& error) {  // syntax errors and numbers beyond a double (1e999)
    const std::string message = "--config file '" + path + "' is not valid JSON: " + without_library_tag(error.what()) +
                                "; fix: write a JSON object of finite numbers, strings and lists, such as "
                                "{\"num_layers\": 4}";
    throw ConfigError(message, {message});
  }
  if (!object.is_object()) {
    const std::string message = "--config file '" + path + "' must hold a JSON object of settings, got " +
                                std::string(object.type_name()) + "; fix: write {\"num_layers\": 4, ...}";
    throw ConfigError(message, {message});
  }
  return is_saved_configuration(object) ? saved_run_settings(object["config"]) : object;
}

bool is_launch_setting(const std::string& key) {
  static const std::vector<std::string> keys{
      "load", "save", "save_interval", "metrics_file", "device",
      // The parallel layout belongs to the launch, not to the run: a checkpoint loads under another one.
      "tensor_model_parallel_size", "sequence_parallel", "pipeline_model_parallel_size",
      "num_layers_per_virtual_pipeline_stage", "data_parallel_size", "expert_model_parallel_size",
      "expert_tensor_parallel_size", "distributed_timeout_minutes", "use_distributed_optimizer", "overlap_grad_reduce",
      "overlap_param_gather", "grad_reduce_in_bf16"};
  return std::find(keys.begin(), keys.end(), key) != keys.end();
}

nlohmann::json saved_run_settings(const nlohmann::json& resolved) {
  nlohmann::json settings = nlohmann::json::object();
  for (const auto& [key, value] : resolved.items()) {
    if (!is_launch_setting(key) && key != "num_microbatches" && key != "moe_layers") settings[key] = value;
  }
  const auto same = [&](const char* a, const char* b) {
    return settings.contains(a) && settings.contains(b) && settings[a] == settings[b];
  };
  if (same("global_batch_size", "micro_batch_size")) settings.erase("global_batch_size");
  if (same("lr_decay_iters", "train_iters")) settings.erase("lr_decay_iters");
  // Without grouped-query attention the resolved group count is just the head count; read back, it
  // would draw MC-11's "has no effect" warning.
  if (!settings.value("group_query_attention", false)) settings.erase("num_query_groups");
  return settings;
}

}  // namespace graphed::config
