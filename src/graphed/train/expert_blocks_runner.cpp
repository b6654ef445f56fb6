// train/expert_blocks_runner.cpp — see train/expert_blocks_runner.h.
#include "graphed/train/expert_blocks_runner.h"

#include <tuple>

#include "graphed/capture/random_stream.h"
#include "graphed/train/full_iteration_runner.h"
#include "graphed/util/error.h"

namespace graphed::train {

ExpertBlocksRunner::ExpertBlocksRunner(TrainingStep& step)
    : ExpertBlocksRunner(step, runner_pool(step.config().cuda_graph)) {}

ExpertBlocksRunner::ExpertBlocksRunner(TrainingStep& step, const capture::GraphPool& pool)
    : step_(step), stream_(step.device()), optimizer_(step, pool, step.config().cuda_graph.optimizer_cuda_graph) {
  GRAPHED_INTERNAL_ASSERT(step.checks_expert_overflow(), "the expert-blocks runner without an overflow check");
  capture::FullIterationGraphOptions options;
  options.warmup_steps = step.config().cuda_graph.warmup_steps;
  options.name = "the full-iteration forward and backward";
  forward_backward_ = std::make_unique<capture::FullIterationGraph>(options, step.device(), pool);
}

ExpertBlocksRunner::~ExpertBlocksRunner() = default;

IterationStats ExpertBlocksRunner::train(const std::vector<Batch>& host_batches) {
  capture::SideStream::Use on_stream(stream_);
  fill_batches(buffer_, host_batches, step_.device());
  const std::vector<Batch> batches = batches_in(buffer_);
  const capture::RandomStateSnapshot before(step_.device());  // where the replay's draws begin, for a rerun
  step_.model()->begin_iteration();  // outside the graph: the paged stash's pools sized once, emptied
  // The gradients were zeroed by the last optimizer step (AdamW starts them at zero).
  std::vector<at::Tensor> losses = forward_backward_->run([&] {
    step_.model()->train();
    const auto [loss, aux_loss] = step_.forward_backward(batches);
    return std::vector<at::Tensor>{loss, aux_loss};
  });
  if (const auto rerun = step_.rerun_if_overflowed(batches, before)) losses = {rerun->first, rerun->second};
  const at::Tensor grad_norm = optimizer_.run();
  return {losses[0], losses[1], grad_norm};
}

at::Tensor ExpertBlocksRunner::evaluate(const std::vector<Batch>& host_batches) {
  capture::SideStream::Use on_stream(stream_);
  return step_.evaluation_loss(step_.to_device(host_batches));
}

std::optional<CaptureReport> ExpertBlocksRunner::capture_report() const {
  if (!forward_backward_->is_captured() || (optimizer_.is_graphed() && !optimizer_.is_captured())) {
    return std::nullopt;
  }
  CaptureReport report;
  report.what = std::string(
                    "the full-iteration forward and backward (fixed expert blocks: the overflow check and the "
                    "optimizer step after it, ") +
                (optimizer_.is_graphed() ? "the step in a graph of its own)" : "the step eager)");
  report.seconds = forward_backward_->capture_seconds() + optimizer_.capture_seconds();
  report.memory = forward_backward_->capture_memory() + optimizer_.capture_memory();
  return report;
}

int64_t ExpertBlocksRunner::graph_count() const {
  return (forward_backward_->is_captured() ? 1 : 0) + optimizer_.graph_count();
}

void ExpertBlocksRunner::delete_cuda_graphs() {
  const capture::GraphPool pool = runner_pool(step_.config().cuda_graph);
  forward_backward_->reset(pool);
  optimizer_.reset(pool);
}

}  // namespace graphed::train
