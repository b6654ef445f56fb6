// train/local_graph_runner.h — --cuda-graph-impl local (research §2, Megatron's CudaGraphManager):
// every unit train/graph_targets.h selects gets a capture::CudaGraphManager. After
// --cuda-graph-warmup-steps eager iterations, the next iteration runs eagerly through the managers'
// runners and records the forward and backward of every microbatch in execution order; at its end
// GraphRegistry::create_cudagraphs() captures every graph in that order into one pool, and from then on
// the iterations replay, with autograd through the replay. With the stage units (or
// --optimizer-cuda-graph) the optimizer step is a graph too. Evaluation replays forward-only graphs, captured on its
// first call. Everything runs on one side stream.
#pragma once

#include <memory>
#include <vector>

#include "graphed/capture/cuda_graph.h"
#include "graphed/capture/cuda_graph_manager.h"
#include "graphed/capture/graph_registry.h"
#include "graphed/train/graph_targets.h"
#include "graphed/train/iteration_runner.h"
#include "graphed/train/optimizer_step_graph.h"

namespace graphed::train {

class LocalGraphRunner final : public IterationRunner {
 public:
  /// step: not owned; outlives this. Needs a CUDA device. Installs the managers into the model.
  explicit LocalGraphRunner(TrainingStep& step);
  /// Puts the model's eager runners back.
  ~LocalGraphRunner() override;

  IterationStats train(const std::vector<Batch>& host_batches) override;
  at::Tensor evaluate(const std::vector<Batch>& host_batches) override;
  std::optional<CaptureReport> capture_report() const override;
  int64_t graph_count() const override;
  void delete_cuda_graphs() override;

  const capture::GraphRegistry& registry() const { return registry_; }

 private:
  LocalGraphRunner(TrainingStep& step, const capture::GraphPool& pool);

  TrainingStep& step_;
  capture::SideStream stream_;
  capture::GraphRegistry registry_;  ///< declared before the managers, which unregister from it
  std::vector<GraphTarget> targets_;
  std::vector<std::shared_ptr<capture::CudaGraphManager>> managers_;
  OptimizerStepGraph optimizer_;
  int64_t iterations_ = 0;
  std::optional<capture::LocalCreation> creation_;
};

}  // namespace graphed::train
