// cli/check_config_command.cpp — see cli/check_config_command.h.
#include "graphed/cli/check_config_command.h"

#include <iomanip>
#include <numeric>
#include <optional>

#include "graphed/cli/distributed_setup.h"
#include "graphed/cli/run_setup.h"
#include "graphed/config/run_config.h"
#include "graphed/util/text.h"

namespace graphed::cli {
namespace {

using nlohmann::json;

/// Where a resolved value came from: the source that set it, "derived" when resolution filled or
/// changed a value the user left at its default, else "default".
std::string origin_of(const std::string& key, const json& resolved, const json& given,
                      const config::SettingOrigins& origins) {
  const auto found = origins.find(key);
  const std::string source = found != origins.end() ? found->second : "default";
  if (given.contains(key) && given[key] != resolved) {
    const bool graph_field = key.find("cuda_graph") != std::string::npos;  // optimizer_cuda_graph too
    if (source == "default") return graph_field ? "normalized" : "derived";
    return source + ", normalized";
  }
  return source;
}

/// The processes a layout's parallel sizes ask for: tensor x pipeline x data, the data-parallel size by default the
/// fewest the expert-parallel size needs (its size, or with whole experts, whose groups run across the tensor ranks,
/// the fewest that make tensor x data a multiple of it).
int64_t processes_asked_for(const config::TrainConfig& train) {
  const int64_t tensor = std::max<int64_t>(1, train.tensor_model_parallel_size);
  const int64_t experts = train.expert_model_parallel_size;
  const int64_t expert_data = train.expert_tensor_parallel_size == std::optional<int64_t>(1) && experts >= 1
                                  ? std::lcm(tensor, experts) / tensor
                                  : experts;
  return std::max<int64_t>(1, train.tensor_model_parallel_size * train.pipeline_model_parallel_size *
                                  train.data_parallel_size.value_or(expert_data));
}

}  // namespace

int run_check_config(const CommandLine& command_line, std::ostream& out) {
  RunSettings run = settings_for_run(command_line);
  // The launch this configuration runs under: WORLD_SIZE when a launcher set it, else the processes its
  // parallel sizes ask for (so a pipeline layout can be checked before launching it).
  const dist::LaunchEnvironment environment = launch_environment();
  run.settings.train.world_size =
      environment.is_distributed() ? environment.world_size : processes_asked_for(run.settings.train);
  const config::Resolution resolution = config::resolve_run_config(run.settings);
  const json resolved = config::run_config_to_json(resolution.config);
  const json given = config::settings_to_json(run.settings);
  const bool valid = !resolution.issues.has_errors();
  const Runnability here = valid ? runnability_here(resolution.config) : Runnability{false, ""};

  if (command_line.json_output) {
    json issues = json::array();
    for (const auto& issue : resolution.issues.all()) {
      issues.push_back(
          {{"rule", issue.rule}, {"severity", config::to_string(issue.severity)}, {"message", issue.message}});
    }
    json origins = json::object();
    for (const auto& [key, value] : resolved.items()) origins[key] = origin_of(key, value, given, run.origins);
    out << json{{"valid", valid},
                {"can_run_here", valid && here.can_run},
                {"run_here", valid ? json(here.reason) : json(nullptr)},
                {"notes", run.notes},
                {"preset", command_line.preset ? json(*command_line.preset) : json(nullptr)},
                {"config_file", command_line.config_file ? json(*command_line.config_file) : json(nullptr)},
                {"issues", issues},
                {"config", resolved},
                {"origins", origins}}
               .dump(2)
        << '\n';
    return valid ? 0 : 1;
  }

  out << "preset: " << command_line.preset.value_or("(none)") << '\n';
  if (command_line.config_file) out << "config file: " << *command_line.config_file << '\n';
  for (const auto& note : run.notes) out << "note: " << note << '\n';
  std::size_t width = 0;
  for (const auto& [key, value] : resolved.items()) width = std::max(width, key.size());
  const auto print = [&](const std::string& key) {
    out << "  " << std::left << std::setw(static_cast<int>(width)) << key << " = "
        << config::setting_value_text(resolved.at(key), " ", "[]");
    const std::string origin = origin_of(key, resolved.at(key), given, run.origins);
    if (origin != "default") out << "  (" << origin << ")";
    out << '\n';
  };
  std::string section;
  for (const auto& spec : config::setting_specs()) {
    if (spec.deprecated || !resolved.contains(spec.key)) continue;
    if (spec.section != section) {
      section = spec.section;
      out << '\n' << (section == "model" ? "model" : section == "train" ? "training" : "cuda graphs") << ":\n";
    }
    print(spec.key);
  }
  out << "\nderived:\n";
  print("num_microbatches");
  print("moe_layers");
  if (!resolution.issues.all().empty()) {
    out << "\nmigrations, notes, warnings and errors:\n";
    for (const auto& issue : resolution.issues.all()) out << "  " << config::format_issue(issue) << '\n';
  }
  const auto errors = resolution.issues.formatted(config::Severity::kError);
  if (valid) {
    out << "\nconfiguration is valid\n" << here.reason << '\n';
  } else {
    out << "\nconfiguration is invalid: " << errors.size() << (errors.size() == 1 ? " error" : " errors") << '\n';
  }
  return valid ? 0 : 1;
}

}  // namespace graphed::cli
