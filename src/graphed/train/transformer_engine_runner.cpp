// train/transformer_engine_runner.cpp — see train/transformer_engine_runner.h.
#include "graphed/train/transformer_engine_runner.h"

#include "graphed/runtime/precision.h"
#include "graphed/train/pipeline_schedule.h"
#include "graphed/util/logging.h"

namespace graphed::train {
namespace {

LayerGraphOptions layer_options(const TrainingStep& step, const capture::GraphPool& pool) {
  LayerGraphOptions options;
  options.runtime_microbatches = step.config().num_microbatches();
  options.warmup_steps = step.config().cuda_graph.warmup_steps;
  options.autocast = runtime::autocasts(step.precision());
  options.retain_backward_graph = step.config().cuda_graph.retain_backward_graph;
  options.pool = pool;
  if (PipelineSchedule* pipeline = step.pipeline()) {
    // Per (layer, microbatch) graph sets in the schedule's order (Megatron §3.2): one set per microbatch.
    options.chunks = pipeline->chunks();
    options.captured_microbatches = step.config().num_microbatches();
    options.order = pipeline->order(options.captured_microbatches);
  }
  return options;
}

}  // namespace

TransformerEngineRunner::TransformerEngineRunner(TrainingStep& step)
    : TransformerEngineRunner(step, runner_pool(step.config().cuda_graph)) {}

TransformerEngineRunner::TransformerEngineRunner(TrainingStep& step, const capture::GraphPool& pool)
    : step_(step),
      stream_(step.device()),
      layers_(step.model(), step.config().cuda_graph, layer_options(step, pool)),
      optimizer_(step, pool) {
  if (layers_.unit_count() == 0) {
    log_warn("cuda_graph_impl=transformer_engine: no layer has a unit that the module selection " +
             config::to_string(step.config().cuda_graph.modules) + " picks; the layers train eagerly");
  }
}

TransformerEngineRunner::~TransformerEngineRunner() = default;

IterationStats TransformerEngineRunner::train(const std::vector<Batch>& host_batches) {
  capture::SideStream::Use on_stream(stream_);
  const std::vector<Batch> batches = step_.to_device(host_batches);
  step_.model()->train();            // the grads were zeroed after the last optimizer step
  step_.model()->begin_iteration();  // the paged stash sized after the first iteration, so before any capture
  // The graphs are captured at the top of the first iteration after the warmup (as MCore does).
  if (!layers_.is_captured() && iterations_ >= step_.config().cuda_graph.warmup_steps) {
    layers_.capture([&] { record_forward(batches); }, step_.device());
    step_.model()->begin_iteration();  // the recorded forward parked rows no backward took back
  }
  auto [loss, aux_loss] = step_.forward_backward_checked(batches);
  const at::Tensor grad_norm = optimizer_.run();
  ++iterations_;
  return {loss, aux_loss, grad_norm};
}

void TransformerEngineRunner::record_forward(const std::vector<Batch>& batches) {
  // Every unit's real arguments: one microbatch's forward, or under pipeline parallelism the pipeline's
  // forward of every microbatch (every rank at once: the stages feed each other). No backward.
  if (PipelineSchedule* pipeline = step_.pipeline()) {
    pipeline->forward_only(batches, /*with_grad=*/true);
  } else {
    step_.forward(batches.front(), 0);
  }
}

at::Tensor TransformerEngineRunner::evaluate(const std::vector<Batch>& host_batches) {
  capture::SideStream::Use on_stream(stream_);
  return step_.evaluation_loss(step_.to_device(host_batches));
}

std::optional<CaptureReport> TransformerEngineRunner::capture_report() const {
  if (!layers_.is_captured() || (optimizer_.is_graphed() && !optimizer_.is_captured())) return std::nullopt;
  CaptureReport report;
  report.what = std::to_string(layers_.unit_count()) + " units (" + std::to_string(layers_.graph_count()) +
                " graphs) ahead of time with the transformer_engine impl" +
                (optimizer_.is_graphed() ? ", and the optimizer step" : "");
  report.seconds = layers_.capture_seconds() + optimizer_.capture_seconds();
  report.memory = layers_.capture_memory() + optimizer_.capture_memory();
  return report;
}

int64_t TransformerEngineRunner::graph_count() const { return layers_.graph_count() + optimizer_.graph_count(); }

void TransformerEngineRunner::delete_cuda_graphs() {
  const capture::GraphPool pool = runner_pool(step_.config().cuda_graph);
  layers_.reset(pool);
  optimizer_.reset(pool);
  iterations_ = step_.config().cuda_graph.warmup_steps;  // the kernels are warm: capture at the next iteration
}

}  // namespace graphed::train
