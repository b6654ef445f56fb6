// cli/run_setup.cpp — see cli/run_setup.h.
#include "graphed/cli/run_setup.h"

#include <algorithm>
#include <cstdlib>

#include "graphed/capture/graph_support.h"
#include "graphed/config/config_file.h"
#include "graphed/config/presets.h"
#include "graphed/kernels/fp8_linear.h"
#include "graphed/runtime/device.h"
#include "graphed/train/checkpoint.h"
#include "graphed/util/build_info.h"
#include "graphed/util/error.h"
#include "graphed/util/host_memory.h"
#include "graphed/util/logging.h"
#include "graphed/util/text.h"

#ifndef GRAPHED_DEFAULT_CORPUS
#define GRAPHED_DEFAULT_CORPUS ".deps/data/sotu.txt"
#endif

namespace graphed::cli {
namespace {

using nlohmann::json;

/// The checkpoint's model and training settings as a source (config::saved_run_settings: without the
/// run's own paths and device, and without what it derived). The CUDA-graph settings stay the command
/// line's: they change how a run executes, not what it computes.
SettingSource checkpoint_source(const train::CheckpointInfo& checkpoint) {
  json values = config::saved_run_settings(checkpoint.config);
  for (const auto& spec : config::setting_specs()) {
    if (spec.section == "cuda_graph") values.erase(spec.key);
  }
  return {"checkpoint " + checkpoint.folder, values};
}

/// "--lr 0.002 (checkpoint: 0.001)" for each checkpoint setting a later source changed.
std::vector<std::string> overrides_of(const SettingSource& checkpoint, const config::Settings& settings) {
  const json final_values = config::settings_to_json(settings);
  std::vector<std::string> changed;
  for (const auto& spec : config::setting_specs()) {  // in --help order
    if (!checkpoint.values.contains(spec.key) || final_values[spec.key] == checkpoint.values[spec.key]) continue;
    changed.push_back(spec.flag() + " " + config::setting_value_text(final_values[spec.key]) +
                      " (checkpoint: " + config::setting_value_text(checkpoint.values[spec.key]) + ")");
  }
  return changed;
}

/// The command line's sources with the checkpoint's inserted after the preset, when --load is set.
std::vector<SettingSource> sources_with_checkpoint(const CommandLine& command_line, std::vector<std::string>& notes) {
  std::vector<SettingSource> sources = command_line.sources;
  if (!command_line.settings.train.load) return sources;
  const train::CheckpointInfo checkpoint = train::read_checkpoint_info(*command_line.settings.train.load);
  const auto after_preset = std::find_if(
      sources.begin(), sources.end(), [](const SettingSource& source) { return source.name.rfind("preset ", 0) != 0; });
  sources.insert(after_preset, checkpoint_source(checkpoint));
  notes.push_back("model and training settings come from the checkpoint " + checkpoint.folder + " (iteration " +
                  std::to_string(checkpoint.iteration) + "); flags and --config override them");
  return sources;
}

}  // namespace

RunSettings settings_for_run(const CommandLine& command_line) {
  RunSettings run;
  const std::vector<SettingSource> sources = sources_with_checkpoint(command_line, run.notes);
  for (const auto& source : sources) config::apply_settings(run.settings, source.values, source.name, &run.origins);
  for (const auto& source : sources) {
    if (source.name.rfind("checkpoint ", 0) != 0) continue;
    const std::vector<std::string> changed = overrides_of(source, run.settings);
    if (!changed.empty()) run.notes.push_back("overriding the checkpoint: " + join(changed, ", "));
  }
  if (auto note = config::fit_preset_warmup(run.settings, run.origins)) run.notes.push_back(std::move(*note));
  return run;
}

config::RunConfig resolve_settings(const config::Settings& settings) {
  config::IssueList issues;
  config::RunConfig config = config::resolve_run_config_or_throw(settings, &issues);
  for (const auto& issue : issues.all()) {
    if (issue.severity == config::Severity::kWarning) log_warn(issue.message + " [" + issue.rule + "]");
    if (issue.severity == config::Severity::kNote) log_info("note: " + issue.message + " [" + issue.rule + "]");
  }
  if (config.model.recompute_granularity) {
    log_warn("--recompute-granularity " + *config.model.recompute_granularity +
             " is checked against the CUDA-graph rules but not implemented yet: this run keeps every activation");
  }
  return config;
}

config::RunConfig resolve_for_run(const CommandLine& command_line, std::ostream& out, int64_t world_size) {
  RunSettings run = settings_for_run(command_line);
  for (const auto& note : run.notes) out << "note: " << note << std::endl;
  run.settings.train.world_size = world_size;
  return resolve_settings(run.settings);
}

void refuse_multi_process_launch(const std::string& command) {
  const char* world_size = std::getenv("WORLD_SIZE");
  if (world_size == nullptr) return;
  char* end = nullptr;
  const long processes = std::strtol(world_size, &end, 10);
  if (end == world_size || *end != '\0' || processes <= 1) return;
  const std::string message = "WORLD_SIZE=" + std::string(world_size) + " asks for " + std::to_string(processes) +
                              " processes (torchrun or another launcher), but `graphed " + command +
                              "` runs as one process: each would do the same work alone; fix: run it without a "
                              "launcher (unset WORLD_SIZE); `graphed train` is the command that runs on several";
  throw ConfigError(message, {message});
}

void require_available_impl(const config::RunConfig& config, const at::Device& device) {
  std::string why_no_fp8;
  if (config.model.fp8() && !kernels::fp8_supported(device, &why_no_fp8)) {
    const std::string message = "--fp8-format " + *config.model.fp8_format +
                                " needs a GPU with FP8 tensor cores, but " + why_no_fp8 +
                                "; fix: train on an H100 or H200 (compute capability 8.9 or more), or drop "
                                "--fp8-format";
    throw ConfigError(message, {message});
  }
  const config::CudaGraphImpl impl = config.cuda_graph.impl;
  if (impl == config::CudaGraphImpl::kNone) return;
  const auto why_not = capture::why_graphs_cannot_run(device);
  if (!why_not) return;
  const std::string message = "--cuda-graph-impl " + config::to_string(impl) + " needs CUDA graphs, but " + *why_not +
                              "; fix: --cuda-graph-impl none, or run on a GPU machine";
  throw ConfigError(message, {message});
}

namespace {

/// The device --device asks for, without printing anything; throws ConfigError for an impossible one.
at::Device decide_device(const std::string& requested) {
  const auto why_not = runtime::why_cuda_is_unavailable();
  if (requested == "cpu") return at::Device(at::kCPU);
  if (requested == "cuda" && why_not) {
    const std::string message = "--device cuda is not possible: " + *why_not +
                                "; fix: --device cpu, or build on a GPU "
                                "machine with scripts/gpu-check";
    throw ConfigError(message, {message});
  }
  return why_not ? at::Device(at::kCPU) : at::Device(at::kCUDA, 0);
}

std::string machine_summary() {
  if (!built_with_cuda()) return "this build has no CUDA (GRAPHED_CUDA=0)";
  return runtime::cuda_available() ? "CUDA build, " + runtime::device_name(at::Device(at::kCUDA, 0))
                                   : "CUDA build, no CUDA device visible";
}

}  // namespace

at::Device choose_device(const std::string& requested, const std::string& cpu_note) {
  const at::Device device = decide_device(requested);
  if (!device.is_cuda() && requested == "auto") {
    log_info(std::string("device: cpu (") +
             (built_with_cuda() ? "no CUDA device visible" : "this build has no CUDA: GRAPHED_CUDA=0") + "; " +
             cpu_note + ")");
  }
  if (!device.is_cuda()) {
    keep_freed_host_memory();  // every command that runs on the CPU comes here once: decided for all of them
    if (const auto blas = reference_blas_loaded()) {
      log_warn("LibTorch uses the reference BLAS (" + *blas +
               "), which trains about 6x slower on the CPU; fix: "
               "install OpenBLAS (apt-get install libopenblas0-pthread, which scripts/setup does)");
    }
  }
  return device;
}

Runnability runnability_here(const config::RunConfig& config) {
  try {
    const at::Device device = decide_device(config.train.device);
    require_available_impl(config, device);
    return {true, "this build and machine can run it: " + machine_summary() + "; --cuda-graph-impl " +
                      config::to_string(config.cuda_graph.impl) + " on " +
                      (device.is_cuda() ? runtime::device_name(device) : std::string("the CPU"))};
  } catch (const ConfigError& error) {
    return {false, std::string("this build and machine cannot run it: ") + error.what()};
  }
}

std::string default_corpus_path() { return GRAPHED_DEFAULT_CORPUS; }

}  // namespace graphed::cli
