// train/local_graph_runner.cpp — see train/local_graph_runner.h.
#include "graphed/train/local_graph_runner.h"

#include "graphed/train/pipeline_schedule.h"
#include "graphed/util/logging.h"

namespace graphed::train {
namespace {

capture::LocalGraphOptions local_options(const config::CudaGraphConfig& graphs, bool pipelined) {
  capture::LocalGraphOptions options;
  options.per_microbatch_runners = pipelined;
  options.retain_backward_graph = graphs.retain_backward_graph;
  options.shared_evaluation_pool = graphs.use_single_mempool;
  return options;
}

/// The units of this rank's chunks (every unit without pipeline parallelism).
std::vector<GraphTarget> rank_targets(TrainingStep& step) {
  const auto all = graph_targets(step.model(), step.config().cuda_graph);
  const auto chunks = step.pipeline() != nullptr ? step.pipeline()->chunks() : whole_model(step.model());
  std::vector<GraphTarget> targets;
  for (const auto& chunk : chunk_targets(all, chunks)) targets.insert(targets.end(), chunk.begin(), chunk.end());
  return targets;
}

}  // namespace

LocalGraphRunner::LocalGraphRunner(TrainingStep& step)
    : LocalGraphRunner(step, runner_pool(step.config().cuda_graph)) {}

LocalGraphRunner::LocalGraphRunner(TrainingStep& step, const capture::GraphPool& pool)
    : step_(step),
      stream_(step.device()),
      registry_(step.device(), local_options(step.config().cuda_graph, step.pipeline() != nullptr), pool),
      targets_(rank_targets(step)),
      optimizer_(step, pool) {
  for (const GraphTarget& target : targets_) {
    managers_.push_back(std::make_shared<capture::CudaGraphManager>(target.unit, registry_));
    install_runner(step_.model(), target, managers_.back());
  }
  if (targets_.empty()) {
    log_warn("cuda_graph_impl=local: no layer has a unit that the module selection " +
             config::to_string(step.config().cuda_graph.modules) + " picks; the layers train eagerly");
  }
}

LocalGraphRunner::~LocalGraphRunner() {
  for (const GraphTarget& target : targets_) install_eager_runner(step_.model(), target);
}

IterationStats LocalGraphRunner::train(const std::vector<Batch>& host_batches) {
  capture::SideStream::Use on_stream(stream_);
  const std::vector<Batch> batches = step_.to_device(host_batches);
  // 1. After the warmup iterations, this iteration records every unit's calls in execution order.
  if (registry_.phase() == capture::LocalPhase::kEager && iterations_ >= step_.config().cuda_graph.warmup_steps) {
    registry_.start_recording();
  }
  // 2. Forward and backward of every microbatch: eager, recording, or replaying the graphs (then run again
  //    eagerly and dropless where a fixed expert block overflowed). The grads were zeroed after the last optimizer
  //    step (AdamW starts them at zero).
  step_.model()->train();
  step_.model()->begin_iteration();  // the paged stash: sized after the first iteration, emptied
  auto [loss, aux_loss] = step_.forward_backward_checked(batches);
  // 3. At the end of the recording iteration, every graph is captured in the recorded order.
  if (registry_.phase() == capture::LocalPhase::kRecording) creation_ = registry_.create_cudagraphs();
  // 4. Gradient norm, clipping and the optimizer step (a graph with the stage units or
  //    --optimizer-cuda-graph).
  const at::Tensor grad_norm = optimizer_.run();
  ++iterations_;
  return {loss, aux_loss, grad_norm};
}

at::Tensor LocalGraphRunner::evaluate(const std::vector<Batch>& host_batches) {
  capture::SideStream::Use on_stream(stream_);
  capture::GraphRegistry::EvaluationScope forward_only_graphs(registry_);
  return step_.evaluation_loss(step_.to_device(host_batches));
}

std::optional<CaptureReport> LocalGraphRunner::capture_report() const {
  if (!creation_ || (optimizer_.is_graphed() && !optimizer_.is_captured())) return std::nullopt;
  CaptureReport report;
  report.what = std::to_string(targets_.size()) + " units (" + std::to_string(creation_->graphs) +
                " graphs, recorded in execution order) with the local impl" +
                (optimizer_.is_graphed() ? ", and the optimizer step" : "");
  report.seconds = creation_->seconds + optimizer_.capture_seconds();
  report.memory = creation_->memory + optimizer_.capture_memory();
  return report;
}

int64_t LocalGraphRunner::graph_count() const { return registry_.graph_count() + optimizer_.graph_count(); }

void LocalGraphRunner::delete_cuda_graphs() {
  const capture::GraphPool pool = runner_pool(step_.config().cuda_graph);
  registry_.delete_cuda_graphs(pool);
  optimizer_.reset(pool);
  creation_.reset();
}

}  // namespace graphed::train
