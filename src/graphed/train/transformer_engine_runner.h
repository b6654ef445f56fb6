// train/transformer_engine_runner.h — --cuda-graph-impl transformer_engine (research §3): after
// --cuda-graph-warmup-steps eager iterations, every unit that train/graph_targets.h selects is captured
// ahead of time (train/layer_graph_helper.h) at the top of an iteration; with the stage units (or
// --optimizer-cuda-graph) the optimizer step becomes a graph too (train/optimizer_step_graph.h). Evaluation stays
// eager, as in TransformerEngine. Everything runs on one side stream.
#pragma once

#include "graphed/capture/cuda_graph.h"
#include "graphed/train/iteration_runner.h"
#include "graphed/train/layer_graph_helper.h"
#include "graphed/train/optimizer_step_graph.h"

namespace graphed::train {

class TransformerEngineRunner final : public IterationRunner {
 public:
  /// step: not owned; outlives this. Needs a CUDA device.
  explicit TransformerEngineRunner(TrainingStep& step);
  ~TransformerEngineRunner() override;

  IterationStats train(const std::vector<Batch>& host_batches) override;
  at::Tensor evaluate(const std::vector<Batch>& host_batches) override;
  std::optional<CaptureReport> capture_report() const override;
  int64_t graph_count() const override;
  void delete_cuda_graphs() override;

 private:
  TransformerEngineRunner(TrainingStep& step, const capture::GraphPool& pool);
  /// The forward whose unit arguments the capture records.
  void record_forward(const std::vector<Batch>& batches);

  TrainingStep& step_;
  capture::SideStream stream_;
  LayerGraphHelper layers_;
  OptimizerStepGraph optimizer_;
  int64_t iterations_ = 0;  ///< since construction or the last delete_cuda_graphs()
};

}  // namespace graphed::train
