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
  /// step: not owned. graphed: capture after warmup_steps eager calls (else always eager). pool: shared
  /// with the graphs that replay before it each iteration, or default (its own).
  OptimizerStepGraph(TrainingStep& step, bool graphed, int64_t warmup_steps, capture::GraphPool pool);
  ~OptimizerStepGraph();

  /// Runs the step; returns the gradient norm before clipping (a device scalar).
  at::Tensor run();
  /// Drops the graph; it is warmed up and captured again, into `pool` when that is shared.
  void reset(capture::GraphPool pool);

  bool is_graphed() const { return static_cast<bool>(graph_); }
  bool is_captured() const { return graph_ && graph_->is_captured(); }
  double capture_seconds() const { return graph_ ? graph_->capture_seconds() : 0.0; }
  int64_t pool_bytes() const { return graph_ ? graph_->pool_bytes() : 0; }
  int64_t graph_bytes() const { return graph_ ? graph_->graph_bytes() : 0; }

 private:
  std::vector<at::Tensor> step_region();

  TrainingStep& step_;
  std::unique_ptr<capture::FullIterationGraph> graph_;  ///< null: the step runs eagerly
};

}  // namespace graphed::train
