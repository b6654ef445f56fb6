// train/optimizer_step_graph.cpp — see train/optimizer_step_graph.h.
#include "graphed/train/optimizer_step_graph.h"

#include <utility>

namespace graphed::train {

OptimizerStepGraph::OptimizerStepGraph(TrainingStep& step, capture::GraphPool pool)
    : OptimizerStepGraph(step, std::move(pool),
                         step.config().cuda_graph.stage_units || step.config().cuda_graph.optimizer_cuda_graph) {}

OptimizerStepGraph::OptimizerStepGraph(TrainingStep& step, capture::GraphPool pool, bool graphed) : step_(step) {
  const config::CudaGraphConfig& graphs = step.config().cuda_graph;
  if (!graphed) return;
  capture::FullIterationGraphOptions options;
  options.name = "the optimizer step";
  options.warmup_steps = graphs.warmup_steps;
  graph_ = std::make_unique<capture::FullIterationGraph>(options, step.device(), pool);
}

OptimizerStepGraph::~OptimizerStepGraph() = default;

std::vector<at::Tensor> OptimizerStepGraph::step_region() {
  const at::Tensor grad_norm = step_.gradient_norm();
  step_.optimizer_step(grad_norm);
  step_.optimizer().zero_grad();  // ready for the next iteration: one launch fewer at its top
  return {grad_norm};
}

at::Tensor OptimizerStepGraph::run() {
  if (!graph_) return step_region()[0];
  return graph_->run([this] { return step_region(); })[0];
}

void OptimizerStepGraph::reset(capture::GraphPool pool) {
  if (graph_) graph_->reset(pool);
}

}  // namespace graphed::train
