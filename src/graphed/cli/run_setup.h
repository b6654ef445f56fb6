// cli/run_setup.h — what `train`, `bench` and `check-config` share before any work: the settings a run
// gets (with --load, the checkpoint's own model and training settings, explicit flags overriding
// them; a preset's warmup fitted to a shorter run), resolving them (printing notes and warnings),
// refusing what this build cannot run, and choosing the device.
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include <ATen/ATen.h>

#include "graphed/cli/command_line.h"
#include "graphed/config/run_config.h"

namespace graphed::cli {

/// The settings of a run, before resolution.
struct RunSettings {
  config::Settings settings;
  config::SettingOrigins origins;
  std::vector<std::string> notes;  ///< what was adapted: checkpoint settings, overrides, a fitted warmup
};

/// The command line's settings, with --load's checkpoint settings layered over the preset and under
/// --config and the flags (Megatron's --use-checkpoint-args, by default), and a preset warmup that
/// does not fit --train-iters scaled down. Throws CheckpointError when --load names a bad checkpoint.
RunSettings settings_for_run(const CommandLine& command_line);

/// Resolves settings; prints the config's notes and warnings to stderr; throws ConfigError with every
/// error.
config::RunConfig resolve_settings(const config::Settings& settings);

/// settings_for_run, its notes printed to out, then resolve_settings for a launch of world_size processes.
config::RunConfig resolve_for_run(const CommandLine& command_line, std::ostream& out, int64_t world_size = 1);

/// Throws ConfigError when a launcher asked for several processes (WORLD_SIZE > 1) for a command that runs
/// as one (`bench`, `generate`): each process would do the same work alone.
void refuse_multi_process_launch(const std::string& command);

/// Throws ConfigError unless the impl can run on the device: none anywhere, the others (full_iteration,
/// transformer_engine, local) on a CUDA device only; and unless the device has FP8 tensor cores where
/// --fp8-format asks for them.
void require_available_impl(const config::RunConfig& config, const at::Device& device);

/// --device auto|cuda|cpu -> the device; auto picks CUDA when this build and machine have it.
/// Throws ConfigError for --device cuda without CUDA, naming why.
at::Device choose_device(const std::string& requested, const std::string& cpu_note = "training eagerly in fp32");

/// Whether this build and machine can train a configuration, and why (check-config prints it).
struct Runnability {
  bool can_run = false;
  std::string reason;
};
Runnability runnability_here(const config::RunConfig& config);

/// The default corpus compiled into this binary (.deps/data/sotu.txt of the source tree).
std::string default_corpus_path();

}  // namespace graphed::cli
