// train/full_iteration_runner.cpp — see train/full_iteration_runner.h.
#include "graphed/train/full_iteration_runner.h"

namespace graphed::train {

std::vector<Batch> batches_in(const capture::StaticBatchBuffer& buffer) {
  std::vector<Batch> batches;
  for (int64_t m = 0; m < buffer.microbatches(); ++m)
    batches.push_back({buffer.microbatch(m)[0], buffer.microbatch(m)[1]});
  return batches;
}

void fill_batches(capture::StaticBatchBuffer& buffer, const std::vector<Batch>& host_batches,
                  const at::Device& device) {
  for (std::size_t m = 0; m < host_batches.size(); ++m) {
    buffer.fill_microbatch(static_cast<int64_t>(m), {host_batches[m].tokens, host_batches[m].labels}, device);
  }
}

FullIterationRunner::FullIterationRunner(TrainingStep& step) : step_(step), stream_(step.device()) {
  const config::CudaGraphConfig& graphs = step.config().cuda_graph;
  const capture::GraphPool pool = runner_pool(graphs);
  capture::FullIterationGraphOptions options;
  options.warmup_steps = graphs.warmup_steps;
  options.name = "the full-iteration training step";
  train_graph_ = std::make_unique<capture::FullIterationGraph>(options, step.device(), pool);
  options.name = "the full-iteration evaluation step";
  eval_graph_ = std::make_unique<capture::FullIterationGraph>(options, step.device(), pool);
}

FullIterationRunner::~FullIterationRunner() = default;

IterationStats FullIterationRunner::train(const std::vector<Batch>& host_batches) {
  capture::SideStream::Use on_stream(stream_);
  // The static buffers first, then warm up, capture or replay the graph.
  fill_batches(train_buffer_, host_batches, step_.device());
  const bool optimizer_inside = step_.config().cuda_graph.optimizer_cuda_graph;
  const auto outputs = train_graph_->run([&] {
    const IterationStats stats = step_.run_iteration(batches_in(train_buffer_), optimizer_inside);
    return std::vector<at::Tensor>{stats.loss, stats.aux_loss, stats.grad_norm};
  });
  // Without --optimizer-cuda-graph the optimizer step runs eagerly after the replay.
  if (!optimizer_inside) step_.optimizer_step(outputs[2]);
  return {outputs[0], outputs[1], outputs[2]};
}

at::Tensor FullIterationRunner::evaluate(const std::vector<Batch>& host_batches) {
  capture::SideStream::Use on_stream(stream_);
  fill_batches(eval_buffer_, host_batches, step_.device());
  return eval_graph_->run([&] { return std::vector<at::Tensor>{step_.evaluation_loss(batches_in(eval_buffer_))}; })[0];
}

std::optional<CaptureReport> FullIterationRunner::capture_report() const {
  if (!train_graph_->is_captured()) return std::nullopt;
  CaptureReport report;
  report.what = std::string("the full-iteration training step (optimizer step ") +
                (step_.config().cuda_graph.optimizer_cuda_graph ? "inside)" : "eager)");
  report.seconds = train_graph_->capture_seconds();
  report.memory = train_graph_->capture_memory();
  return report;
}

int64_t FullIterationRunner::graph_count() const {
  return (train_graph_->is_captured() ? 1 : 0) + (eval_graph_->is_captured() ? 1 : 0);
}

void FullIterationRunner::delete_cuda_graphs() {
  const capture::GraphPool pool = runner_pool(step_.config().cuda_graph);
  train_graph_->reset(pool);
  eval_graph_->reset(pool);
}

}  // namespace graphed::train
