// cli/run_setup.h — what `train` and `bench` share before any work: resolving the configuration
// (printing its notes and warnings), refusing what this version cannot run, and choosing the device.
#pragma once

#include <string>

#include <ATen/ATen.h>

#include "graphed/cli/command_line.h"
#include "graphed/config/run_config.h"

namespace graphed::cli {

/// Resolves the command line's settings; prints notes and warnings to stderr; throws ConfigError
/// with every error.
config::RunConfig resolve_for_run(const CommandLine& command_line);

/// Throws ConfigError unless the impl can run on the device: none anywhere, the others (full_iteration,
/// transformer_engine, local) on a CUDA device only.
void require_available_impl(const config::RunConfig& config, const at::Device& device);

/// --device auto|cuda|cpu -> the device; auto picks CUDA when this build and machine have it.
/// Throws ConfigError for --device cuda without CUDA, naming why.
at::Device choose_device(const std::string& requested);

/// The default corpus compiled into this binary (.deps/data/sotu.txt of the source tree).
std::string default_corpus_path();

}  // namespace graphed::cli
