// cli/distributed_setup.cpp — see cli/distributed_setup.h.
#include "graphed/cli/distributed_setup.h"

#include <cstdlib>
#include <iostream>

#include "graphed/runtime/device.h"
#include "graphed/util/error.h"
#include "graphed/util/logging.h"
#include "graphed/util/text.h"

namespace graphed::cli {

DistributedRun::DistributedRun(const config::RunConfig& config, const dist::LaunchEnvironment& environment,
                               const at::Device& device) {
  const std::chrono::milliseconds timeout(config.train.distributed_timeout_minutes * 60 * 1000);
  groups_ = std::make_unique<dist::ProcessGroups>(environment, dist::make_parallel_layout(config, environment.rank),
                                                  device, timeout);
  // A rank that stops beating for a minute (or the timeout, when shorter) has died: the others stop.
  const auto stall_limit = std::min<std::chrono::milliseconds>(timeout, std::chrono::milliseconds(60 * 1000));
  const int64_t rank = environment.rank;
  monitor_ = std::make_unique<dist::RankMonitor>(groups_->connect_store(), rank, environment.world_size, stall_limit,
                                                 [rank](const std::string& why) {
                                                   std::cerr << "error: rank " << rank << " is " << why << std::endl;
                                                   std::_Exit(1);
                                                 });
}

DistributedRun::~DistributedRun() = default;

void DistributedRun::report_failure(const std::exception& error) {
  if (dynamic_cast<const Error*>(&error) != nullptr) {
    monitor_->report_failure(error.what());
    return;
  }
  const std::string cause = without_library_tag(error.what());
  monitor_->report_failure("internal error (a bug in graphed): " + cause.substr(0, cause.find('\n')) +
                           "; fix: please report it with the command line that caused it");
}

void DistributedRun::finish() {
  groups_->world().barrier();
  monitor_->finish();
  if (groups_->environment().rank == 0) monitor_->wait_for_everyone();
  monitor_.reset();
  groups_->shutdown();
}

dist::LaunchEnvironment launch_environment() {
  const dist::LaunchEnvironment environment = dist::read_launch_environment();
  set_log_rank(static_cast<int>(environment.rank));
  return environment;
}

at::Device device_for_rank(const at::Device& chosen, const dist::LaunchEnvironment& environment) {
  if (!chosen.is_cuda() || !environment.is_distributed()) return chosen;
  const int64_t gpus = runtime::cuda_device_count();
  if (environment.local_rank >= gpus) {
    const std::string message = "rank " + std::to_string(environment.rank) + " has LOCAL_RANK " +
                                std::to_string(environment.local_rank) + ", but this machine shows " +
                                std::to_string(gpus) + " GPU(s): more ranks than GPUs on one node; fix: launch " +
                                "at most " + std::to_string(gpus) + " processes per node (torchrun --nproc-per-node " +
                                std::to_string(gpus) + "), or train on CPUs with --device cpu";
    throw DistributedError(message);  // this rank's own: printed by every rank that finds it
  }
  return at::Device(at::kCUDA, static_cast<c10::DeviceIndex>(environment.local_rank));
}

void require_one_tensor_group(const dist::LaunchEnvironment& environment, int64_t tensor_size,
                              const std::string& command) {
  if (!environment.is_distributed() || tensor_size == environment.world_size) return;
  const std::string message = "WORLD_SIZE=" + std::to_string(environment.world_size) + " asks for " +
                              std::to_string(environment.world_size) + " processes, but `" + command +
                              "` runs several only as one tensor-parallel group (--tensor-model-parallel-size " +
                              std::to_string(tensor_size) +
                              "); fix: launch as many processes as --tensor-model-parallel-size, or run it "
                              "without a launcher";
  throw ConfigError(message, {message});
}

std::ostream& null_stream() {
  static std::ostream stream(nullptr);  // no buffer: every write is dropped
  return stream;
}

}  // namespace graphed::cli
