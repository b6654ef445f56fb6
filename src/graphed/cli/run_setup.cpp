// cli/run_setup.cpp — see cli/run_setup.h.
#include "graphed/cli/run_setup.h"

#include "graphed/capture/device.h"
#include "graphed/util/build_info.h"
#include "graphed/util/error.h"
#include "graphed/util/logging.h"

#ifndef GRAPHED_DEFAULT_CORPUS
#define GRAPHED_DEFAULT_CORPUS ".deps/data/sotu.txt"
#endif

namespace graphed::cli {

config::RunConfig resolve_for_run(const CommandLine& command_line) {
  config::IssueList issues;
  config::RunConfig config = config::resolve_run_config_or_throw(command_line.settings, &issues);
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

void require_available_impl(const config::RunConfig& config, const at::Device& device) {
  const config::CudaGraphImpl impl = config.cuda_graph.impl;
  if (impl == config::CudaGraphImpl::kNone) return;
  if (device.is_cuda()) return;
  const std::string message =
      "--cuda-graph-impl " + config::to_string(impl) + " needs a CUDA device, but this run is on the CPU (" +
      (built_with_cuda() ? std::string("no CUDA device is visible")
                         : std::string("this binary was built against a CPU-only LibTorch: GRAPHED_CUDA=0")) +
      "); fix: --cuda-graph-impl none, or run on a GPU machine";
  throw ConfigError(message, {message});
}

at::Device choose_device(const std::string& requested) {
  const bool cuda = capture::cuda_available();
  if (requested == "cpu") return at::Device(at::kCPU);
  if (requested == "cuda" && !cuda) {
    const std::string why = built_with_cuda() ? "no CUDA device is visible"
                                              : "this binary was built against a CPU-only LibTorch (GRAPHED_CUDA=0)";
    const std::string message = "--device cuda is not possible: " + why + "; fix: --device cpu, or build on a GPU "
                                "machine with scripts/gpu-check";
    throw ConfigError(message, {message});
  }
  if (cuda) return at::Device(at::kCUDA, 0);
  log_info(std::string("device: cpu (") +
           (built_with_cuda() ? "no CUDA device visible" : "this build has no CUDA: GRAPHED_CUDA=0") +
           "; training eagerly in fp32)");
  return at::Device(at::kCPU);
}

std::string default_corpus_path() { return GRAPHED_DEFAULT_CORPUS; }

}  // namespace graphed::cli
