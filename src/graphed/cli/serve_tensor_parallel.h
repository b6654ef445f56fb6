// cli/serve_tensor_parallel.h — how `graphed serve` runs over its processes, chosen once at start-up
// (serving_processes): one process, or one tensor-parallel group under torchrun, where every rank loads the
// whole model into host memory, keeps its part (model::GptModel::split_for_tensor_parallel) and moves only that
// to its GPU, and builds the same engine; the first rank answers clients and schedules, and broadcasts each step
// it launches, which the others follow (serve/step_broadcast.h). The HTTP side itself is the serve command's.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include <ATen/ATen.h>

#include "graphed/cli/distributed_setup.h"
#include "graphed/infer/serving_engine.h"
#include "graphed/infer/step_relay.h"
#include "graphed/model/gpt_model.h"
#include "graphed/serve/engine_calls.h"
#include "graphed/serve/step_broadcast.h"

namespace graphed::cli {

/// Answers clients through `calls` until the server stops; returns the exit status (the serve command's HTTP side).
using AnswerClients = std::function<int(serve::EngineCalls& calls)>;

/// The steps of `graphed serve` that depend on how many processes serve, in the order it takes them.
class ServingProcesses {
 public:
  virtual ~ServingProcesses() = default;
  /// Moves the loaded model to its device before quantization (a tensor-parallel rank loaded it into host memory).
  virtual void move_to_device(model::GptModel& model) = 0;
  /// Sets in `options` what every rank's engine must share: the same cache blocks (the fewest that fit on
  /// any rank, so that a followed step fits each) and the prompt vocabulary. Call before building the engine.
  virtual void agree_on(infer::ServingOptions& options, model::GptModel& model) = 0;
  /// The relay to build the engine with (after agree_on): it tells the steps the engine launches to whoever
  /// follows them (nobody, for one process). It outlives the engine.
  virtual infer::StepRelay& step_relay() = 0;
  /// Runs this process's part with the built engine and returns the exit status: the only process or the first
  /// rank calls `answer_clients` with the engine calls to make (aborting them if it throws); another rank follows
  /// the first rank's steps until it stops.
  virtual int run(infer::ServingEngine& engine, const AnswerClients& answer_clients) = 0;
  /// A good end, after the engine calls' finish(): every rank waits for the others.
  virtual void finish() = 0;
};

/// One process (tensor_size 1), or the tensor-parallel group (ServingGroup) that `model` is split over. Throws
/// as ServingGroup's constructor does.
std::unique_ptr<ServingProcesses> serving_processes(const dist::LaunchEnvironment& environment, int64_t tensor_size,
                                                    const at::Device& device, model::GptModel& model,
                                                    bool peer_all_reduce);

/// The ranks of one tensor-parallel group, each with its part of the model.
class ServingGroup final : public ServingProcesses {
 public:
  /// Connects the launch's ranks (there must be exactly `tensor_size`) and splits `model` over them; with
  /// peer_all_reduce, the decode steps' sums take peer memory where the GPUs allow it (dist/peer_collectives.h).
  /// Throws ConfigError when the launch or the model does not fit tensor parallelism, naming the fix.
  ServingGroup(const dist::LaunchEnvironment& environment, int64_t tensor_size, const at::Device& device,
               model::GptModel& model, bool peer_all_reduce);
  ~ServingGroup() override;

  void move_to_device(model::GptModel& model) override;
  /// The fewest of every rank's blocks; prompt ids must stay below the vocabulary before any padding for the split.
  /// Sets up the step broadcast for `options`' max requests.
  void agree_on(infer::ServingOptions& options, model::GptModel& model) override;
  /// The step broadcast (the first rank's sends; the others' engines never launch a step of their own).
  infer::StepRelay& step_relay() override;
  /// The first rank schedules and broadcasts its steps; each other rank follows them (signals are the first
  /// rank's to act on: it ends when that rank says so, 1 when that rank failed).
  int run(infer::ServingEngine& engine, const AnswerClients& answer_clients) override;
  /// Every step has run on every rank; the run's groups close, then the step broadcast's.
  void finish() override;

 private:
  /// A rank other than the first: follows the first rank's steps until it says stop (0) or that it failed (1).
  int follow_first_rank(infer::ServingEngine& engine);

  int64_t rank_ = 0;
  int64_t prompt_vocabulary_ = 0;
  at::Device device_;
  std::unique_ptr<DistributedRun> run_;
  // The step broadcast's groups over the tensor-parallel ranks: the headers (control) and the inputs.
  std::unique_ptr<dist::Communicator> control_, inputs_;
  std::unique_ptr<serve::StepBroadcast> broadcast_;  // from agree_on, when max requests are known
};

/// Refuses a launch `graphed serve` cannot run: several processes that are not one tensor-parallel group,
/// or --tensor-model-parallel-size above 1 without a launcher.
void require_serving_launch(const dist::LaunchEnvironment& environment, int64_t tensor_size);

}  // namespace graphed::cli
