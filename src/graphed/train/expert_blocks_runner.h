// train/expert_blocks_runner.h — --cuda-graph-impl full_iteration under --moe-expert-rank-capacity-factor with expert
// parallelism (Megatron's paged-stash runner around its full-iteration graph): the forward and backward of every
// microbatch are one graph over static batch buffers; after each replay, the overflow check (one host read) and,
// where a block overflowed on any rank, the same batches again, eagerly and dropless; then the gradient norm, the
// clipped optimizer step and the zeroing of the gradients (train/optimizer_step_graph.h: a graph of its own with
// --optimizer-cuda-graph). So the update always comes from a dropless computation. Evaluation runs eagerly: it is
// dropless, and the dropless exchange reads counts on the host.
#pragma once

#include <memory>

#include "graphed/capture/cuda_graph.h"
#include "graphed/capture/full_iteration_graph.h"
#include "graphed/capture/static_batch_buffer.h"
#include "graphed/train/iteration_runner.h"
#include "graphed/train/optimizer_step_graph.h"

namespace graphed::train {

class ExpertBlocksRunner final : public IterationRunner {
 public:
  /// step: not owned; outlives this. Needs a CUDA device and step.checks_expert_overflow().
  explicit ExpertBlocksRunner(TrainingStep& step);
  ExpertBlocksRunner(TrainingStep& step, const capture::GraphPool& pool);
  ~ExpertBlocksRunner() override;

  IterationStats train(const std::vector<Batch>& host_batches) override;
  at::Tensor evaluate(const std::vector<Batch>& host_batches) override;
  std::optional<CaptureReport> capture_report() const override;
  int64_t graph_count() const override;
  void delete_cuda_graphs() override;

 private:
  TrainingStep& step_;
  capture::SideStream stream_;
  std::unique_ptr<capture::FullIterationGraph> forward_backward_;
  OptimizerStepGraph optimizer_;
  capture::StaticBatchBuffer buffer_{"training batches"};
};

}  // namespace graphed::train
