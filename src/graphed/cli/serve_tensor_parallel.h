// cli/serve_tensor_parallel.h — `graphed serve` as one tensor-parallel group under torchrun: every rank loads
// the whole model into host memory, keeps its part (model::GptModel::split_for_tensor_parallel) and moves only
// that to its GPU, and runs the same engine;
// the first rank answers clients and tells the others each engine call (serve/mirrored_engine.h).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include <ATen/ATen.h>

#include "graphed/cli/distributed_setup.h"
#include "graphed/model/gpt_model.h"
#include "graphed/serve/mirrored_engine.h"

namespace graphed::cli {

class ServingGroup {
 public:
  /// Connects the launch's ranks (there must be exactly `tensor_size`) and splits `model` over them; with
  /// peer_all_reduce, the decode steps' sums take peer memory where the GPUs allow it (dist/peer_collectives.h).
  /// Throws ConfigError when the launch or the model does not fit tensor parallelism, naming the fix.
  ServingGroup(const dist::LaunchEnvironment& environment, int64_t tensor_size, const at::Device& device,
               model::GptModel& model, bool peer_all_reduce);
  ~ServingGroup();

  bool is_first() const { return rank_ == 0; }
  /// The vocabulary before any padding for the split: prompt ids must stay below it.
  int64_t prompt_vocabulary() const { return prompt_vocabulary_; }
  /// Tells the other ranks this one failed (their rank monitors stop them).
  void report_failure(const std::exception& error) { run_->report_failure(error); }
  /// The fewest of every rank's `blocks` (each rank's cache must hold the same blocks to schedule alike).
  int64_t agree_on_blocks(int64_t blocks);
  serve::CommandChannel& channel() { return *channel_; }
  /// A good end: every rank waits for the others.
  void finish() { run_->finish(); }

 private:
  int64_t rank_ = 0;
  int64_t prompt_vocabulary_ = 0;
  at::Device device_;
  std::unique_ptr<DistributedRun> run_;
  std::unique_ptr<serve::CommandChannel> channel_;
};

/// Refuses a launch `graphed serve` cannot run: several processes that are not one tensor-parallel group,
/// or --tensor-model-parallel-size above 1 without a launcher.
void require_serving_launch(const dist::LaunchEnvironment& environment, int64_t tensor_size);

}  // namespace graphed::cli
