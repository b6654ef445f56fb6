// train/optimizer_step_graph.cpp — see train/optimizer_step_graph.h.
#include "graphed/train/optimizer_step_graph.h"

namespace graphed::train {

OptimizerStepGraph::OptimizerStepGraph(TrainingStep& step, capture::GraphPool pool) : step_(step) {
  const config::CudaGraphConfig& graphs = step.config().cuda_graph;
  if (!graphs.stage_units && !graphs.optimizer_cuda_graph) return;
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
