// cli/distributed_setup.h — a `train` launched as several processes (torchrun, or any launcher that
// sets the same variables): the rank's device (GPU LOCAL_RANK), its process groups and the rank
// monitor, and what only rank 0 does (print, write metrics and checkpoints). One process: nothing.
#pragma once

#include <exception>
#include <memory>
#include <optional>
#include <ostream>

#include <ATen/ATen.h>

#include "graphed/config/run_config.h"
#include "graphed/dist/launch_environment.h"
#include "graphed/dist/process_groups.h"
#include "graphed/dist/rank_monitor.h"

namespace graphed::cli {

class DistributedRun {
 public:
  /// Connects rank `environment.rank` and creates its groups on `device`; starts the monitor.
  DistributedRun(const config::RunConfig& config, const dist::LaunchEnvironment& environment, const at::Device& device);
  ~DistributedRun();

  dist::ProcessGroups& groups() { return *groups_; }
  /// Tells the other ranks this one failed (they stop too), before the error leaves run_train: a graphed
  /// error's message, anything else as an internal error's first line (no library backtrace).
  void report_failure(const std::exception& error);
  /// The error another rank reported, if any (a collective fails here when that rank goes away).
  std::optional<std::string> failure_of_another_rank() { return monitor_->failure_of_another_rank(); }
  /// The end of a good run: every rank waits for the others, so rank 0's store stays up until all are done.
  void finish();

 private:
  std::unique_ptr<dist::ProcessGroups> groups_;
  std::unique_ptr<dist::RankMonitor> monitor_;
};

/// The launch's environment; sets the logging rank. Throws DistributedError for a broken one.
dist::LaunchEnvironment launch_environment();

/// The rank's device: --device as for one process, then GPU LOCAL_RANK on CUDA. Throws DistributedError
/// when there are more ranks on this node than GPUs.
at::Device device_for_rank(const at::Device& chosen, const dist::LaunchEnvironment& environment);

/// Refuses a launch of several processes that are not exactly one tensor-parallel group of `tensor_size`
/// ranks (`command`, e.g. "graphed serve", runs several only so), naming the fix.
void require_one_tensor_group(const dist::LaunchEnvironment& environment, int64_t tensor_size,
                              const std::string& command);

/// A stream that drops everything (the output of ranks other than 0).
std::ostream& null_stream();

}  // namespace graphed::cli
