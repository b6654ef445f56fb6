// train/optimizer_step_graph.h — the gradient norm, the clipping and the optimizer step of the
// per-layer implementations, run after the last microbatch's backward, and the zeroing of the gradients
// for the next iteration (so that the iteration itself launches one kernel fewer): one graph (Megatron's
// optimizer CUDA graph, research §4.6) captured after the warmup iterations and replayed every
// iteration, or the same work eagerly when it is not graphed. AdamW keeps its step count and learning
// rate on the device, so the graph replays the schedule correctly.
#pragma once

#include <memory>

#include "graphed/capture/full_iteration_graph.h"
#include "graphed/train/training_step.h"

namespace graphed::train {

class OptimizerStepGraph {
 public:
  /// step: not owned. Graphed with the stage units or cuda_graph.optimizer_cuda_graph (else always
  /// eager), captured after the warmup iterations. pool: shared with the graphs that replay before it
  /// each iteration, or default (its own).
  OptimizerStepGraph(TrainingStep& step, capture::GraphPool pool);
  /// The same, graphed when `graphed` says so (a full-iteration runner: with --optimizer-cuda-graph only).
  OptimizerStepGraph(TrainingStep& step, capture::GraphPool pool, bool graphed);
  ~OptimizerStepGraph();

  /// Runs the step; returns the gradient norm before clipping (a device scalar).
  at::Tensor run();
  /// Drops the graph; it is warmed up and captured again, into `pool` when that is shared.
  void reset(capture::GraphPool pool);

  bool is_graphed() const { return static_cast<bool>(graph_); }
  bool is_captured() const { return graph_ && graph_->is_captured(); }
  int64_t graph_count() const { return is_captured() ? 1 : 0; }
  double capture_seconds() const { return graph_ ? graph_->capture_seconds() : 0.0; }
  capture::CaptureMemory capture_memory() const { return graph_ ? graph_->capture_memory() : capture::CaptureMemory(); }

 private:
  std::vector<at::Tensor> step_region();

  TrainingStep& step_;
  std::unique_ptr<capture::FullIterationGraph> graph_;  ///< null: the step runs eagerly
};

}  // namespace graphed::train
